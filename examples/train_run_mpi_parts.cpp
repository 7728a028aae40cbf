// sparsepush-train: the algorithm factory, CHOCO and centralized runs over MPI (see train_instances.hpp).
#include "train_instances.hpp"
#ifdef SPARSEPUSH_HAS_MPI
namespace sparsepush::inline v0 {
SPARSEPUSH_TRAIN_MPI_PARTS()
}  // namespace sparsepush::inline v0
#endif
