// sparsepush/checkpoint.hpp: crash-safe checkpoints: the format (sections, values, CRC-32;
// checkpoint/format.hpp) and the atomic POSIX file I/O (checkpoint/file.hpp). Include a part to
// need less: code that only writes or reads checkpoint sections needs checkpoint/format.hpp.
#pragma once

#include "checkpoint/file.hpp"
#include "checkpoint/format.hpp"
