#pragma once
// The simulated device: CUDA's semantics on the host, so that the GPU path's ordering runs
// in CI at several ranks. A sim::device is one rank's GPU context: its streams are FIFO
// workers (one thread each) that sleep a seeded random delay before every operation, its
// events complete when the work recorded before them has, and its memory pool poisons
// freed memory (all bits set: NaN in every floating type) and hands it out again at once.
// So a missing stream wait shows as work that runs in another order than the code assumes,
// and a buffer freed before its last reader shows as NaN, instead of both passing by luck.
//
// The names are the CUDA path's (strata::cuda): owned_stream, device_buffer, and the
// functions below take a stream as CUDA's take a cudaStream_t. Errors follow CUDA's too: an
// operation that throws leaves its stream failed, later operations on it are skipped, and
// synchronize() throws the first error. synchronize() waits within a deadline and then
// throws timeout_error listing what each stream still holds (the hang report), where CUDA
// would block forever. What it cannot model: kernels run one after another per stream, on
// host threads; the memory is host memory (no copy engine, no cache, no peer access).
//
// Plain C++ without fmt, so that the GPU path's shared headers read the same under both.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "strata/detail/text.hpp"
#include "strata/error.hpp"
#include "strata/model/memory.hpp"
#include "strata/timeout_setting.hpp"

namespace strata::sim {

struct device_options {
  /// Seeds every stream's delays (each stream mixes in its own number).
  std::uint64_t seed = 1;
  /// Each operation on a stream starts after a delay drawn from [0, max_delay].
  std::chrono::microseconds max_delay{100};
  /// Freed memory is filled with all bits set (NaN) before it is handed out again.
  bool poison = true;
  /// How long synchronize() waits before the hang report.
  std::chrono::milliseconds timeout = std::chrono::ceil<std::chrono::milliseconds>(default_timeout());
};

class device;

/// An in-order queue of operations run by one worker thread.
class stream {
 public:
  stream(device& owner, std::string name, std::uint64_t seed);
  ~stream();  // completes what was queued, then stops
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// Queues `work`, named `what` in reports; returns its ticket (1, 2, ...).
  std::uint64_t enqueue(std::string what, std::function<void()> work);
  /// The ticket of the last operation queued (0 before any).
  std::uint64_t queued() const;
  const std::string& name() const { return name_; }
  device& owner() const { return owner_; }

 private:
  friend class device;
  struct operation {
    std::string what;
    std::function<void()> work;
  };
  void run();

  device& owner_;
  std::string name_;
  std::mt19937_64 random_;
  std::deque<operation> queue_;  // guarded by the device's mutex
  std::uint64_t queued_ = 0, completed_ = 0;
  std::string running_;          // what the worker is doing now (the hang report)
  std::exception_ptr error_;     // sticky: later operations are skipped
  bool stopping_ = false;
  std::thread worker_;
};

/// What CUDA calls a cudaStream_t: a handle, not an owner.
using stream_t = stream*;

/// A point in a stream: complete once the work queued before record() has run.
class event {
 public:
  /// Captures the work queued on `s` so far (cudaEventRecord).
  void record(stream_t s) {
    stream_ = s;
    ticket_ = s->queued();
  }
  stream_t recorded_on() const { return stream_; }
  std::uint64_t ticket() const { return ticket_; }

 private:
  stream_t stream_ = nullptr;  // never recorded: complete, as in CUDA
  std::uint64_t ticket_ = 0;
};

/// One rank's simulated GPU: its streams' shared lock and clock, and its memory pool.
class device {
 public:
  explicit device(device_options options = {}) : options_(options) {}
  ~device();
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  const device_options& options() const { return options_; }

  /// A stream of this device, numbered in creation order for its seed.
  std::unique_ptr<stream> make_stream(std::string name) {
    std::lock_guard lock(mutex_);
    return std::make_unique<stream>(*this, std::move(name), options_.seed * 0x9E3779B97F4A7C15ull + streams_.size());
  }

  /// Queues on `on` a wait for `e` (cudaStreamWaitEvent): later work on `on` runs after the
  /// work `e` captured.
  void wait_event(stream_t on, const event& e) {
    if (!e.recorded_on()) return;
    stream_t producer = e.recorded_on();
    const std::uint64_t ticket = e.ticket();
    on->enqueue(strata::detail::cat("wait for ", producer->name(), " #", ticket), [this, producer, ticket] {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return producer->completed_ >= ticket || cancelled_; });
      if (cancelled_) throw usage_error("sim::device: the device was destroyed while a stream waited on another");
    });
  }

  /// Whether the work `e` captured has run (cudaEventQuery).
  bool complete(const event& e) const {
    std::lock_guard lock(mutex_);
    return !e.recorded_on() || e.recorded_on()->completed_ >= e.ticket();
  }

  /// Blocks until the work queued on `s` so far has run, within options().timeout; throws
  /// the stream's first error, or timeout_error with every stream's pending work. `who`
  /// ends the subject of messages (" on rank 3").
  void synchronize(stream_t s, std::string_view who = "") {
    const std::uint64_t ticket = s->queued();
    std::unique_lock lock(mutex_);
    const bool done = changed_.wait_for(lock, options_.timeout, [&] { return s->completed_ >= ticket; });
    if (s->error_) std::rethrow_exception(s->error_);
    if (!done)
      throw timeout_error(strata::detail::cat("sim::device", who, ": stream \"", s->name(), "\" did not finish its work within ",
                                    options_.timeout.count(), " ms; still queued:\n", report(lock)));
  }

  /// Blocks until the work `e` captured has run; as synchronize().
  void synchronize(const event& e, std::string_view who = "") {
    if (!e.recorded_on()) return;
    stream_t s = e.recorded_on();
    std::unique_lock lock(mutex_);
    const bool done = changed_.wait_for(lock, options_.timeout, [&] { return s->completed_ >= e.ticket(); });
    if (s->error_) std::rethrow_exception(s->error_);
    if (!done)
      throw timeout_error(strata::detail::cat("sim::device", who, ": an event on stream \"", s->name(),
                                    "\" did not complete within ", options_.timeout.count(), " ms; still queued:\n",
                                    report(lock)));
  }

  /// Every stream's running and queued operations, one line each.
  std::string pending() const {
    std::unique_lock lock(mutex_);
    return report(lock);
  }

  /// Ends every wait of a stream on another with an error (the device is going away).
  void cancel() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    changed_.notify_all();
  }

  // --- memory: a pool that reuses freed blocks at once ----------------------------------

  /// `bytes` of device memory (cudaMalloc); 256-byte aligned, as CUDA's.
  void* allocate(std::size_t bytes) {
    const std::size_t size = std::max<std::size_t>(round_up(bytes), alignment);
    std::lock_guard lock(memory_mutex_);
    void* p = nullptr;
    if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
      p = it->second.back();  // the most recently freed block: reused while a late reader may still look
      it->second.pop_back();
    } else {
      p = ::operator new(size, std::align_val_t{alignment});
    }
    live_[p] = size;
    return p;
  }

  /// Returns `p` to the pool (cudaFree), poisoned first.
  void free(void* p) {
    if (!p) return;
    std::lock_guard lock(memory_mutex_);
    auto it = live_.find(p);
    if (it == live_.end()) throw usage_error("sim::device::free: the pointer is not memory of this device, or was freed twice");
    if (options_.poison) std::memset(p, 0xFF, it->second);
    free_[it->second].push_back(p);
    live_.erase(it);
  }

  /// Whether [p, p + bytes) lies in one live allocation of this device.
  bool owns(const void* p, std::size_t bytes) const {
    std::lock_guard lock(memory_mutex_);
    auto it = live_.upper_bound(const_cast<void*>(p));
    if (it == live_.begin()) return false;
    --it;
    const auto* begin = static_cast<const std::byte*>(it->first);
    const auto* at = static_cast<const std::byte*>(p);
    return at >= begin && at + bytes <= begin + it->second;
  }

  /// Bytes allocated and not freed.
  std::size_t bytes_in_use() const {
    std::lock_guard lock(memory_mutex_);
    std::size_t total = 0;
    for (const auto& [p, size] : live_) total += size;
    return total;
  }

  static constexpr std::size_t alignment = 256;

 private:
  friend class stream;
  static std::size_t round_up(std::size_t bytes) { return (bytes + alignment - 1) / alignment * alignment; }

  std::string report(std::unique_lock<std::mutex>&) const {
    std::string out;
    for (const stream* s : streams_) {
      out += strata::detail::cat("  stream \"", s->name_, "\": ", s->queued_ - s->completed_, " operation(s) pending");
      if (!s->running_.empty()) out += strata::detail::cat("; running: ", s->running_);
      for (const stream::operation& op : s->queue_) out += strata::detail::cat("; then: ", op.what);
      out += '\n';
    }
    return out;
  }

  device_options options_;
  mutable std::mutex mutex_;            // the streams' queues and clocks
  std::condition_variable changed_;     // any stream completed an operation, or cancel()
  std::vector<stream*> streams_;
  bool cancelled_ = false;
  mutable std::mutex memory_mutex_;
  std::map<void*, std::size_t> live_;
  std::map<std::size_t, std::vector<void*>> free_;
};

inline stream::stream(device& owner, std::string name, std::uint64_t seed)
    : owner_(owner), name_(std::move(name)), random_(seed) {
  owner_.streams_.push_back(this);  // the caller holds the device's lock (make_stream)
  worker_ = std::thread([this] { run(); });
}

inline stream::~stream() {
  {
    std::lock_guard lock(owner_.mutex_);
    stopping_ = true;
  }
  owner_.changed_.notify_all();
  worker_.join();
  std::lock_guard lock(owner_.mutex_);
  std::erase(owner_.streams_, this);
}

inline std::uint64_t stream::enqueue(std::string what, std::function<void()> work) {
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(owner_.mutex_);
    queue_.push_back({std::move(what), std::move(work)});
    ticket = ++queued_;
  }
  owner_.changed_.notify_all();
  return ticket;
}

inline std::uint64_t stream::queued() const {
  std::lock_guard lock(owner_.mutex_);
  return queued_;
}

inline void stream::run() {
  std::unique_lock lock(owner_.mutex_);
  for (;;) {
    owner_.changed_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // stopping, and everything queued has run
    operation op = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = error_ != nullptr;
    running_ = op.what;
    const auto delay = std::chrono::microseconds(
        owner_.options_.max_delay.count() > 0
            ? std::uniform_int_distribution<long long>(0, owner_.options_.max_delay.count())(random_)
            : 0);
    lock.unlock();
    std::exception_ptr failed;
    if (!skip) {
      std::this_thread::sleep_for(delay);
      try {
        op.work();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    op = {};  // its captures (a freed buffer's owner) go before the completion is seen
    lock.lock();
    if (failed && !error_) error_ = failed;
    running_.clear();
    ++completed_;
    owner_.changed_.notify_all();
  }
}

inline device::~device() {
  cancel();  // streams still alive belong to their owners, who destroy them first
  // What a failed stream never freed (its frees were skipped), and the pool.
  for (const auto& [p, size] : live_) ::operator delete(p, std::align_val_t{alignment});
  for (const auto& [size, blocks] : free_)
    for (void* p : blocks) ::operator delete(p, std::align_val_t{alignment});
}

/// A stream owned by an object (cuda::owned_stream's counterpart).
class owned_stream {
 public:
  owned_stream(device& d, std::string name = "stream") : stream_(d.make_stream(std::move(name))) {}
  operator stream_t() const { return stream_.get(); }
  stream_t get() const { return stream_.get(); }

 private:
  std::unique_ptr<stream> stream_;
};

/// Queues `body` on `s` (a kernel launch): it runs on the stream's worker, in order.
template <class Body>
void launch(stream_t s, std::string name, Body&& body) {
  s->enqueue(std::move(name), std::forward<Body>(body));
}

/// Queues a copy of `bytes` (cudaMemcpyAsync; host and device memory are both host memory here).
inline void copy_async(void* to, const void* from, std::size_t bytes, stream_t s) {
  if (bytes == 0) return;
  launch(s, strata::detail::cat("copy of ", bytes, " bytes"), [to, from, bytes] { std::memmove(to, from, bytes); });
}

/// Queues a fill of `bytes` with `value` (cudaMemsetAsync).
inline void memset_async(void* to, int value, std::size_t bytes, stream_t s) {
  if (bytes == 0) return;
  launch(s, strata::detail::cat("memset of ", bytes, " bytes"), [to, value, bytes] { std::memset(to, value, bytes); });
}

/// `size` elements of T in device memory, allocated at once and freed in order on
/// `stream` (cudaMallocAsync, cudaFreeAsync): the memory returns to the pool, poisoned,
/// when the stream reaches the free, whatever other streams still do with it.
template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  device_buffer(std::size_t size, stream_t s) : size_(size), stream_(s) {
    if (size != 0) data_ = static_cast<T*>(s->owner().allocate(size * sizeof(T)));
  }
  device_buffer(device_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)), stream_(other.stream_) {}
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  ~device_buffer() { release(); }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<T> span() const { return {data_, size_}; }
  /// The buffer as device memory, for binding variables (device_variable).
  device_span<T> memory() const { return {data_, size_}; }

 private:
  void release() noexcept {
    if (!data_) return;
    void* p = std::exchange(data_, nullptr);
    device* d = &stream_->owner();
    stream_->enqueue("free", [d, p] { d->free(p); });
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  stream_t stream_ = nullptr;
};

}  // namespace strata::sim
