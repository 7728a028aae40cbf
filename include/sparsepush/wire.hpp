// sparsepush/wire.hpp: the whole wire codec of a compressed message q = C(v), over bytes: the
// encodings and the 32-byte header (wire/format.hpp), the index sections (wire/index_codecs.hpp),
// the readers that define q (wire/value_readers.hpp) and the quantizers that write it, with QSGD's
// random stream and the vector kernels (wire/value_codecs.hpp). Include a part to need less.
#pragma once

#include "wire/format.hpp"
#include "wire/index_codecs.hpp"
#include "wire/value_codecs.hpp"
#include "wire/value_readers.hpp"
