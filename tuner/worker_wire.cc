#include "tuner/worker_wire.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse {
namespace {

constexpr uint32_t kMagic = 0x3157464B;  // "KFW1"

using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events`, or DeadlineExceeded(`late`) once
// `deadline` passes (never when !has_deadline).
absl::Status Await(int fd, short events, bool has_deadline, Clock::time_point deadline,
                   const char* late) {
  while (true) {
    int wait_ms = -1;
    if (has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return absl::DeadlineExceededError(late);
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    }
    pollfd pfd{fd, events, 0};
    int pr = poll(&pfd, 1, wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("poll: ", std::strerror(errno)));
    }
    if (pr > 0) return absl::OkStatus();  // Ready, or an error the next call reports.
  }
}

// Reads exactly n bytes before `deadline` (or forever when !has_deadline).
absl::Status ReadFull(int fd, char* p, size_t n, bool has_deadline, Clock::time_point deadline) {
  while (n > 0) {
    KFUSE_RETURN_IF_ERROR(
        Await(fd, POLLIN, has_deadline, deadline, "worker did not answer in time"));
    ssize_t got = recv(fd, p, n, 0);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    if (got == 0) return absl::UnavailableError("peer closed the connection");
    p += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

// Writes exactly n bytes before `deadline`, as ReadFull reads. MSG_DONTWAIT:
// a blocking send waits for room for all n bytes, past any deadline.
absl::Status WriteFull(int fd, const char* p, size_t n, bool has_deadline,
                       Clock::time_point deadline) {
  while (n > 0) {
    KFUSE_RETURN_IF_ERROR(Await(fd, POLLOUT, has_deadline, deadline,
                                "peer did not take the frame in time (it is not reading)"));
    ssize_t put = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (put < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

// timeout_seconds < 0: no deadline.
Clock::time_point DeadlineAfter(double timeout_seconds) {
  return Clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(std::max(timeout_seconds, 0.0) * 1e6));
}

}  // namespace

std::string WireReader::Str() {
  uint64_t n = U64();
  if (!ok()) return {};
  if (n > data_.size() - pos_) {
    Fail("string runs past the end");
    return {};
  }
  std::string s(data_.substr(pos_, n));
  pos_ += n;
  return s;
}

uint64_t WireReader::Count(size_t min_item_bytes) {
  uint64_t n = U64();
  if (ok() && min_item_bytes > 0 && n > (data_.size() - pos_) / min_item_bytes) {
    Fail(absl::StrCat("count ", n, " exceeds the payload"));
    return 0;
  }
  return ok() ? n : 0;
}

void WireReader::Fail(const std::string& why) {
  if (error_.empty()) error_ = absl::StrCat(why, " at byte ", pos_);
}

absl::Status WireReader::Finish() const {
  if (!error_.empty()) return absl::DataLossError(absl::StrCat("worker message: ", error_));
  if (pos_ != data_.size()) {
    return absl::DataLossError(
        absl::StrCat("worker message: ", data_.size() - pos_, " trailing bytes"));
  }
  return absl::OkStatus();
}

void WireReader::Raw(void* p, size_t n) {
  if (!ok() || n > data_.size() - pos_) {
    Fail("message too short");
    std::memset(p, 0, n);
    return;
  }
  std::memcpy(p, data_.data() + pos_, n);
  pos_ += n;
}

absl::Status SendFrame(int fd, uint32_t type, const std::string& payload, double timeout_seconds) {
  const bool has_deadline = timeout_seconds >= 0;
  const Clock::time_point deadline = DeadlineAfter(timeout_seconds);
  WireWriter header;
  header.U32(kMagic);
  header.U32(type);
  header.U64(payload.size());
  for (const std::string* part : {&header.data(), &payload}) {
    KFUSE_RETURN_IF_ERROR(WriteFull(fd, part->data(), part->size(), has_deadline, deadline));
  }
  return absl::OkStatus();
}

absl::StatusOr<Frame> RecvFrame(int fd, double timeout_seconds, uint64_t max_bytes) {
  const bool has_deadline = timeout_seconds >= 0;
  const Clock::time_point deadline = DeadlineAfter(timeout_seconds);
  char header[16];
  absl::Status s = ReadFull(fd, header, sizeof(header), has_deadline, deadline);
  if (!s.ok()) return s;
  WireReader r(absl::string_view(header, sizeof(header)));
  uint32_t magic = r.U32();
  Frame f;
  f.type = r.U32();
  uint64_t len = r.U64();
  if (magic != kMagic) return absl::DataLossError("worker stream: bad frame magic");
  if (len > max_bytes) {
    return absl::DataLossError(
        absl::StrCat("worker stream: frame of ", len, " bytes, over the ", max_bytes, " accepted"));
  }
  // The buffer grows with the bytes that came, so a garbled length costs
  // about twice what the peer really sent, not the length.
  while (f.payload.size() < len) {
    const size_t have = f.payload.size();
    const size_t more = std::min<uint64_t>(len - have, std::max<size_t>(have, 64 << 10));
    f.payload.resize(have + more);
    s = ReadFull(fd, f.payload.data() + have, more, has_deadline, deadline);
    if (!s.ok()) return s;
  }
  return f;
}

}  // namespace kfuse
