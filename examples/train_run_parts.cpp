// sparsepush-train: the in-process algorithm factory, CHOCO and centralized runs (see train_instances.hpp).
#include "train_instances.hpp"
namespace sparsepush::inline v0 {
SPARSEPUSH_TRAIN_LOCAL_PARTS()
}  // namespace sparsepush::inline v0
