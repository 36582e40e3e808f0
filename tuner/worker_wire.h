// The byte level of the worker protocol: little-endian fields and
// length-prefixed frames over a socket, written by hand so tuner/ needs no
// protobuf. Messages themselves are in worker_protocol.h.
//
//   WireWriter w;  w.U32(7);  w.Str("hi");
//   KFUSE_RETURN_IF_ERROR(SendFrame(fd, 3, w.data(), /*timeout_seconds=*/5));
//   KFUSE_ASSIGN_OR_RETURN(Frame f, RecvFrame(fd, /*timeout_seconds=*/5, kMaxFrameBytes));
//   WireReader r(f.payload);  uint32_t n = r.U32();  std::string s = r.Str();
//   KFUSE_RETURN_IF_ERROR(r.Finish());
#ifndef KFUSE_TUNER_WORKER_WIRE_H_
#define KFUSE_TUNER_WORKER_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kfuse {

class WireWriter {
 public:
  void U8(uint8_t v) { Raw(&v, 1); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  void Bool(bool v) { U8(v ? 1 : 0); }
  void Str(absl::string_view s) {
    U64(s.size());
    buf_.append(s.data(), s.size());
  }
  const std::string& data() const { return buf_; }

 private:
  void Raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;  // Hosts are little-endian x86-64/aarch64 on both ends.
};

// Reads fields in order; a short or malformed payload sets a sticky error and
// makes every later read return zeros, checked once with Finish().
class WireReader {
 public:
  explicit WireReader(absl::string_view data) : data_(data) {}
  uint8_t U8() {
    uint8_t v = 0;
    Raw(&v, 1);
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    Raw(&v, 4);
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  int64_t I64() {
    int64_t v = 0;
    Raw(&v, 8);
    return v;
  }
  double F64() {
    double v = 0;
    Raw(&v, 8);
    return v;
  }
  bool Bool() { return U8() != 0; }
  std::string Str();
  // A count of items about to be read, each at least `min_item_bytes` long;
  // fails (returns 0) if the rest of the payload cannot hold them.
  uint64_t Count(size_t min_item_bytes);
  void Fail(const std::string& why);
  bool ok() const { return error_.empty(); }
  // DataLoss unless every byte was read without error.
  absl::Status Finish() const;

 private:
  void Raw(void* p, size_t n);
  absl::string_view data_;
  size_t pos_ = 0;
  std::string error_;
};

struct Frame {
  uint32_t type = 0;
  std::string payload;
};

// The largest frame a worker takes: a task carries every candidate's cubin.
// What the parent takes from a worker is far smaller
// (kMaxWorkerReplyBytes, worker_protocol.h).
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 31;

// Writes a whole frame (magic, type, length, payload). Never raises SIGPIPE;
// Unavailable if the peer is gone, DeadlineExceeded if it has not taken the
// whole frame within timeout_seconds (< 0: waits forever).
absl::Status SendFrame(int fd, uint32_t type, const std::string& payload, double timeout_seconds);

// Reads one frame of at most max_bytes. timeout_seconds < 0 waits forever.
// DeadlineExceeded on timeout, Unavailable on end of stream, DataLoss on a
// corrupt frame or one longer than max_bytes. Memory grows with the bytes
// that arrive, not with the length the header claims.
absl::StatusOr<Frame> RecvFrame(int fd, double timeout_seconds, uint64_t max_bytes);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_WIRE_H_
