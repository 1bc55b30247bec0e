#include "server/client_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <string_view>

#include <httplib.h>

namespace kvscope::server {
namespace {

// The numeric address and port of a socket end, as httplib reports them.
bool describe(const sockaddr_storage& a, std::string& host, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    if (!inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof buf)) return false;
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    if (!inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof buf)) return false;
    port = ntohs(v6.sin6_port);
  } else {
    return false;
  }
  host = buf;
  return true;
}

bool matches(int fd, const httplib::Request& r) {
  sockaddr_storage local{}, remote{};
  socklen_t localLen = sizeof local, remoteLen = sizeof remote;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localLen) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remoteLen) != 0) return false;
  std::string localHost, remoteHost;
  int localPort = -1, remotePort = -1;
  return describe(local, localHost, localPort) && describe(remote, remoteHost, remotePort) &&
         localPort == r.local_port && remotePort == r.remote_port && remoteHost == r.remote_addr &&
         localHost == r.local_addr;
}

}  // namespace

ClientProbe::ClientProbe(const httplib::Request& request) {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int fd = -1;
    if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc()) continue;
    std::error_code linkError;
    const auto target = std::filesystem::read_symlink(it->path(), linkError);
    if (linkError || !std::string_view(target.native()).starts_with("socket:")) continue;
    if (matches(fd, request)) {
      m_socket = fd;
      return;
    }
  }
}

bool ClientProbe::gone() const {
  if (m_socket < 0) return false;
  char byte = 0;
  const ssize_t n = recv(m_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;  // the client closed its end
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace kvscope::server
