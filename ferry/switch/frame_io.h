// Reading and writing whole protocol frames on a socket, with deadlines. The header is decoded
// (and refused) before any payload byte is read; the payload buffer grows with the bytes that
// actually arrive, so a header that promises a large payload costs nothing until it is sent.
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

#include "ferry/switch/protocol.h"
#include "ferry/switch/socket_io.h"

namespace ferry::switch_ {

struct FrameRead {
  ReadStatus status = ReadStatus::ok;  // ok: header and payload are complete
  bool header_read = false;            // header is valid (status may still say the payload failed)
  FrameHeader header;
  std::vector<std::byte> payload;
};

// Waits until `idle_deadline` (or `stop_fd`) for a frame's first byte, then gives the whole frame
// `frame_timeout` from that byte. Raises SwitchError (decode_header's) for a bad header; then
// `header_read` is false and no payload byte has been read.
FrameRead read_frame(int fd, const Limits& limits, Clock::time_point idle_deadline,
                     std::chrono::milliseconds frame_timeout, int stop_fd);

}  // namespace ferry::switch_
