#pragma once
// ClientProbe: whether the client of the HTTP request being handled has
// closed its connection, while the handler waits (a queued request) before it
// writes anything. cpp-httplib 0.11 (Debian 12) gives a handler no access to
// its socket, so the probe finds it among the process's sockets by the
// request's local and remote address, once, and then peeks at it: an orderly
// close or a reset reads as gone; pending bytes (a pipelined request) do not.
// A socket it cannot find is never reported gone.

#include <string>

namespace httplib {
struct Request;
}

namespace kvscope::server {

class ClientProbe {
 public:
  explicit ClientProbe(const httplib::Request& request);
  bool gone() const;

 private:
  int m_socket = -1;
};

}  // namespace kvscope::server
