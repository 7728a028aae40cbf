// sparsepush-train: the run over MPI (see train_instances.hpp).
#include "train_instances.hpp"
#ifdef SPARSEPUSH_HAS_MPI
namespace sparsepush::inline v0 {
SPARSEPUSH_TRAIN_MPI_RUN()
}  // namespace sparsepush::inline v0
#endif
