// sparsepush-train: the in-process run (see train_instances.hpp).
#include "train_instances.hpp"
namespace sparsepush::inline v0 {
SPARSEPUSH_TRAIN_LOCAL_RUN()
}  // namespace sparsepush::inline v0
