// sparsepush/detail/thread_pool.hpp: a small fork-join pool (std::jthread) for per-node work.
// parallel_for(n, f) runs f(0..n-1) on the caller and the workers and returns when all are done;
// the first exception thrown by any f is rethrown on the caller. Work is independent per index,
// so results never depend on the thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparsepush {
inline namespace v0 {
namespace detail {

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

  void parallel_for(std::size_t n, const std::function<void(std::size_t)>& f) {
    parallel_for_worker(n, [&f](std::size_t i, std::size_t) { f(i); });
  }

  /// parallel_for where f(i, w) also gets the index w in [0, size()) of the thread running it
  /// (0: the caller), so that per-thread scratch can be owned by the caller and lent by index.
  void parallel_for_worker(std::size_t n, const std::function<void(std::size_t, std::size_t)>& f) {
    if (workers_.empty() || n <= 1) {
      for (std::size_t i = 0; i < n; ++i) f(i, 0);
      return;
    }
    {
      std::lock_guard lock(mu_);
      job_ = &f;
      n_ = n;
      next_.store(0);
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

 private:
  void run_items(std::size_t worker) {
    for (std::size_t i; (i = next_.fetch_add(1)) < n_;) {
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
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t n_ = 0;
  std::atomic<std::size_t> next_{0};
  std::size_t busy_ = 0;
  std::size_t generation_ = 0;
  std::exception_ptr error_;
};

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
