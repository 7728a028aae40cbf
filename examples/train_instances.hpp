// sparsepush-train's heavy template instances, compiled in their own translation units so that a
// build with two or more jobs compiles them side by side: the in-process run (train_run_local.cpp),
// the algorithm factory with the CHOCO and centralized runs (train_run_parts.cpp), and under MPI the
// same two over the MPI transport (train_run_mpi.cpp, train_run_mpi_parts.cpp). train.cpp (options,
// MPI start-up, summary) sees only these declarations. Every instance is called once per run, so
// the split costs no inlining inside a round.
#pragma once
#include <sparsepush/train/reference_run.hpp>
#ifdef SPARSEPUSH_HAS_MPI
#include <sparsepush/train/mpi.hpp>
#endif

namespace sparsepush::inline v0::instances {
using local_choco = choco<float, any_compressor, any_schedule, loopback_network>;
using local_choco_push = choco_push<float, any_compressor, any_schedule, loopback_network>;
using tracked_choco_push = tracking<local_choco_push>;
using tracked_sp = tracking<sparse_push<float, any_compressor, any_schedule, loopback_network>>;
#ifdef SPARSEPUSH_HAS_MPI
using mpi_choco = choco<float, any_compressor, any_schedule, mpi_network>;
using mpi_choco_push = choco_push<float, any_compressor, any_schedule, mpi_network>;
#endif
}  // namespace sparsepush::inline v0::instances

// One list of instances, expanded as declarations here (extern) and as definitions in the .cpp files.
#define SPARSEPUSH_TRAIN_LOCAL_RUN(EXTERN)                                                                   \
  EXTERN template reference_outcome run_reference<single_process, void>(                                    \
      const run_spec&, const reference_plan&, const fashion_mnist&, const nn::model&, single_process&, void*, \
      const reference_io&, run_clock::time_point);
#define SPARSEPUSH_TRAIN_LOCAL_PARTS(EXTERN)                                                                   \
  EXTERN template run_algorithm<void> make_run_algorithm<void>(const run_spec&, std::vector<std::vector<float>>, \
                                                               const run_layout&, void*);                    \
  EXTERN template train_result trainer<float, single_process>::run<instances::local_choco>(instances::local_choco&); \
  EXTERN template train_result trainer<float, single_process>::run<instances::local_choco_push>(                  \
      instances::local_choco_push&);                                                                               \
  EXTERN template train_result trainer<float, single_process>::run<instances::tracked_choco_push>(                \
      instances::tracked_choco_push&);                                                                             \
  EXTERN template train_result trainer<float, single_process>::run<instances::tracked_sp>(instances::tracked_sp&); \
  EXTERN template train_result trainer<float, single_process>::run<centralized<float>>(centralized<float>&);
#define SPARSEPUSH_TRAIN_MPI_RUN(EXTERN)                                                                        \
  EXTERN template reference_outcome run_reference<mpi_process_group, mpi_network>(                              \
      const run_spec&, const reference_plan&, const fashion_mnist&, const nn::model&, mpi_process_group&,       \
      mpi_network*, const reference_io&, run_clock::time_point);
#define SPARSEPUSH_TRAIN_MPI_PARTS(EXTERN)                                                                        \
  EXTERN template run_algorithm<mpi_network> make_run_algorithm<mpi_network>(                                   \
      const run_spec&, std::vector<std::vector<float>>, const run_layout&, mpi_network*);                       \
  EXTERN template train_result trainer<float, mpi_process_group>::run<instances::mpi_choco>(instances::mpi_choco&); \
  EXTERN template train_result trainer<float, mpi_process_group>::run<instances::mpi_choco_push>(                  \
      instances::mpi_choco_push&);                                                                                  \
  EXTERN template train_result trainer<float, mpi_process_group>::run<instances::tracked_choco_push>(              \
      instances::tracked_choco_push&);                                                                              \
  EXTERN template train_result trainer<float, mpi_process_group>::run<instances::tracked_sp>(instances::tracked_sp&); \
  EXTERN template train_result trainer<float, mpi_process_group>::run<centralized<float>>(centralized<float>&);

namespace sparsepush::inline v0 {
SPARSEPUSH_TRAIN_LOCAL_RUN(extern)
SPARSEPUSH_TRAIN_LOCAL_PARTS(extern)
#ifdef SPARSEPUSH_HAS_MPI
SPARSEPUSH_TRAIN_MPI_RUN(extern)
SPARSEPUSH_TRAIN_MPI_PARTS(extern)
#endif
}  // namespace sparsepush::inline v0
