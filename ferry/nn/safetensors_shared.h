// Loading a safetensors file once into shared pinned host memory (memory::SharedHostBuffer), so
// that N worker processes map the same pages and none of them reads the disk again. The whole
// file image (header and data) goes into the buffer, so the buffer describes itself: a process
// that receives only the buffer's handle rebuilds the tensors from it, re-validating the header
// (a peer's bytes are input like any file's).
// Guarantees: tensors() are CPU tensors viewing the buffer (zero-copy; each keeps the buffer
// mapped), contiguous, with the file's names, dtypes and shapes, in the file's data order; a
// tensor whose offset is not a multiple of its element size is copied out instead (the
// reference writer never makes one); a BOOL byte other than 0 or 1 is an Error, as in load().
#pragma once

#include <memory>
#include <string>

#include "ferry/memory/shared_host_buffer.h"
#include "ferry/nn/safetensors.h"

namespace ferry::safetensors {

struct SharedSafetensors {
  std::shared_ptr<memory::SharedHostBuffer> buffer;
  // Names, dtypes, shapes; tensor t's bytes are buffer->data() + header.data_offset + t.begin.
  Header header;

  // Views of the buffer (see the file comment).
  TensorDict tensors() const;
};

// Reads the file at `path` into a new SharedHostBuffer (its size: the file's).
SharedSafetensors load_into_shared(const std::string& path);

// The file image held by `buffer` (another process's load_into_shared, imported with
// SharedHostBuffer::import); `source` names it in errors.
SharedSafetensors open_shared(std::shared_ptr<memory::SharedHostBuffer> buffer,
                              const std::string& source = "<shared buffer>");

}  // namespace ferry::safetensors
