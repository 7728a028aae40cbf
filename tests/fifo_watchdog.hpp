// tests/fifo_watchdog.hpp: run a call that may block in open() on a FIFO (what the readers and
// writers of files did before they refused non-regular files) without hanging the test binary.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <future>
#include <string>
#include <thread>

namespace test {

/// What `f` throws (its what()), run on a thread. Still running after 10 s means blocked in
/// open() on the FIFO at `fifo` (where the old readers and writers waited forever): the FIFO's ends are then
/// opened, which releases it, and the result says it blocked.
template <class F>
std::string with_fifo_watchdog(const std::string& fifo, F f) {
  auto done = std::async(std::launch::async, [&]() -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "no error";
  });
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return done.get();
  // a blocked writer's open() returns once a reader opens, a blocked reader's once a writer
  // opens; the write end closed, the reader sees the end of the file; the read end stays open
  // until the call returns (a writer without reader would get SIGPIPE)
  const int r = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK), w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (w >= 0) ::close(w);
  done.wait();
  if (r >= 0) ::close(r);
  return "blocked in open() on the FIFO " + fifo;
}

}  // namespace test
