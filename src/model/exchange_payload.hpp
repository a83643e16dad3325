// Building and reading the byte payloads of a group's all-to-all (ExpertGroup's
// and SequenceGroup's exchange): one part per member, back to back, with each
// part's size beside them.
#pragma once

#include <cstring>
#include <vector>

namespace strata::model {

// Appends n values of T to out, as raw bytes.
template <class T>
void append(std::vector<char>& out, const T* data, size_t n) {
  const size_t at = out.size();
  out.resize(at + n * sizeof(T));
  if (n > 0) std::memcpy(out.data() + at, data, n * sizeof(T));
}

// Reads n values of T from in into data, and moves in past them.
template <class T>
void take(const char*& in, T* data, size_t n) {
  if (n > 0) std::memcpy(data, in, n * sizeof(T));
  in += n * sizeof(T);
}

// send <- part(m) for every member m in order (part appends to send);
// send_bytes[m] <- the size of member m's part.
template <class Part>
void pack_parts(std::vector<char>& send, std::vector<int>& send_bytes, int members, Part&& part) {
  send.clear();
  send_bytes.assign(size_t(members), 0);
  for (int m = 0; m < members; ++m) {
    const size_t start = send.size();
    part(m);
    send_bytes[size_t(m)] = int(send.size() - start);
  }
}

}  // namespace strata::model
