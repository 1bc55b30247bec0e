#include "server/host_check.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace kvscope::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host of "name", "name:port", "[v6]" or "[v6]:port", lowercased; empty
// when malformed.
std::string hostOf(std::string_view authority) {
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return {};
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return {};
    return lower(authority.substr(1, close - 1));
  }
  const size_t colon = authority.find(':');
  // A bare IPv6 literal has several colons and no port.
  if (colon != std::string_view::npos && authority.find(':', colon + 1) == std::string_view::npos)
    authority = authority.substr(0, colon);
  return lower(authority);
}

bool isIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool isLoopbackHost(const std::string& host) {
  if (host == "localhost" || host.ends_with(".localhost") || host == "::1") return true;
  unsigned char v4[4];
  return inet_pton(AF_INET, host.c_str(), v4) == 1 && v4[0] == 127;
}

bool listed(const std::string& host, const std::vector<std::string>& extra) {
  return std::any_of(extra.begin(), extra.end(),
                     [&](const std::string& e) { return e == "*" || lower(e) == host; });
}

}  // namespace

bool hostAllowed(std::string_view hostHeader, const std::vector<std::string>& extra) {
  if (hostHeader.empty()) return true;
  const std::string host = hostOf(hostHeader);
  if (host.empty()) return false;
  return isIpLiteral(host) || isLoopbackHost(host) || listed(host, extra);
}

bool originAllowed(std::string_view origin, std::string_view boundHost,
                   const std::vector<std::string>& extra) {
  if (origin.empty()) return true;
  std::string_view rest;
  if (origin.starts_with("http://")) {
    rest = origin.substr(7);
  } else if (origin.starts_with("https://")) {
    rest = origin.substr(8);
  } else {
    return false;  // "null" (a sandboxed frame, a file page) and other schemes
  }
  if (rest.find('/') != std::string_view::npos) return false;  // an origin has no path
  const std::string host = hostOf(rest);
  if (host.empty()) return false;
  return isLoopbackHost(host) || host == lower(boundHost) || listed(host, extra);
}

}  // namespace kvscope::server
