// sparsepush/train/run_spec.hpp: a training run as one value (run_spec, run_description.hpp),
// the rules its settings obey (run_spec_rules.hpp) and the values computed from it that every
// door asks for (SCSP's final-round count, run_final_rounds.hpp).
#pragma once

#include "run_description.hpp"
#include "run_final_rounds.hpp"
#include "run_spec_rules.hpp"
