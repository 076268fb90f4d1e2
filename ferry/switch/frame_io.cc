// Whole-frame reads with deadlines (frame_io.h).
#include "ferry/switch/frame_io.h"

#include <algorithm>
#include <array>

namespace ferry::switch_ {

FrameRead read_frame(int fd, const Limits& limits, Clock::time_point idle_deadline,
                     std::chrono::milliseconds frame_timeout, int stop_fd) {
  FrameRead result;
  std::array<std::byte, kHeaderBytes> header{};
  size_t got = 0;
  // The first byte: wait as long as the connection may stay idle.
  result.status = read_full(fd, std::span(header).first(1), idle_deadline, stop_fd, &got);
  if (result.status != ReadStatus::ok) return result;
  const auto frame_deadline = Clock::now() + frame_timeout;
  result.status = read_full(fd, std::span(header).subspan(1), frame_deadline, -1, &got);
  if (result.status != ReadStatus::ok) return result;
  result.header = decode_header(header, limits);
  result.header_read = true;
  const uint64_t total = result.header.payload_bytes;
  constexpr size_t kChunk = size_t{1} << 20;
  while (result.payload.size() < total) {
    const size_t before = result.payload.size();
    const size_t step = static_cast<size_t>(std::min<uint64_t>(kChunk, total - before));
    result.payload.resize(before + step);
    result.status =
        read_full(fd, std::span(result.payload).subspan(before, step), frame_deadline, -1, &got);
    if (result.status != ReadStatus::ok) {
      result.payload.resize(before + got);
      return result;
    }
  }
  return result;
}

}  // namespace ferry::switch_
