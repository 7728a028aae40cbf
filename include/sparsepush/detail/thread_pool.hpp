// sparsepush/detail/thread_pool.hpp: a small fork-join pool (std::jthread) for per-node work.
// parallel_for(n, f) runs f(0..n-1) on the caller and the workers (thread w takes the indices
// [n w / T, n (w + 1) / T) of T threads) and returns when all are done;
// the first exception thrown by any f is rethrown on the caller. Work is independent per index,
// so results never depend on the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// A non-owning reference to a callable void(size_t, size_t): what a parallel loop hands its
/// workers without allocating (a std::function of a lambda with more than two captures would).
class index_function_ref {
 public:
  template <class F>
  explicit index_function_ref(F& f) noexcept
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, std::size_t i, std::size_t w) { (*static_cast<F*>(o))(i, w); }) {}
  void operator()(std::size_t i, std::size_t w) const { call_(obj_, i, w); }

 private:
  void* obj_;
  void (*call_)(void*, std::size_t, std::size_t);
};

class thread_pool {
 public:
  explicit thread_pool(std::size_t threads) {
    for (std::size_t t = 1; t < std::max<std::size_t>(threads, 1); ++t)
      workers_.emplace_back([this, t](std::stop_token st) { work(st, t); });
  }
  ~thread_pool() {
    {
      std::lock_guard lock(mu_);
      for (auto& w : workers_) w.request_stop();
    }
    cv_.notify_all();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  std::size_t size() const noexcept { return workers_.size() + 1; }

  /// Run f(i) for i in [0, n); f is called in place (no copy, no allocation).
  template <class F>
  void parallel_for(std::size_t n, F&& f) {
    auto g = [&f](std::size_t i, std::size_t) { f(i); };
    parallel_for_worker(n, g);
  }

  /// parallel_for where f(i, w) also gets the index w in [0, size()) of the thread running it
  /// (0: the caller), so that per-thread scratch can be owned by the caller and lent by index.
  template <class F>
  void parallel_for_worker(std::size_t n, F&& f) {
    if (workers_.empty() || n <= 1) {
      for (std::size_t i = 0; i < n; ++i) f(i, std::size_t{0});
      return;
    }
    const index_function_ref ref(f);
    run_job(n, ref);
  }

 private:
  void run_job(std::size_t n, const index_function_ref& f) {
    {
      std::lock_guard lock(mu_);
      job_ = &f;
      n_ = n;
      busy_ = workers_.size();
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    run_items(0);
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return busy_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  void run_items(std::size_t worker) {
    // a fixed block of indices per thread: index i always runs on the same thread, so per-thread
    // scratch sees the same work every round (it is sized after the first rounds, and stays warm)
    const std::size_t threads = workers_.size() + 1;
    const std::size_t begin = n_ * worker / threads, end = n_ * (worker + 1) / threads;
    for (std::size_t i = begin; i < end; ++i) {
      try {
        (*job_)(i, worker);
      } catch (...) {
        std::lock_guard lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }
  void work(std::stop_token st, std::size_t worker) {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return st.stop_requested() || generation_ != seen; });
        if (st.stop_requested()) return;
        seen = generation_;
      }
      run_items(worker);
      std::lock_guard lock(mu_);
      if (--busy_ == 0) done_cv_.notify_one();
    }
  }

  std::vector<std::jthread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const index_function_ref* job_ = nullptr;
  std::size_t n_ = 0;
  std::size_t busy_ = 0;
  std::size_t generation_ = 0;
  std::exception_ptr error_;
};

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
