#pragma once
// Which Host and Origin headers the server answers, against DNS rebinding and
// cross-site requests from web pages (the class of Ollama's CVE-2024-28224): a
// page on evil.example can make the browser send requests to 127.0.0.1 under
// its own name, so a request is answered only when it names the server by
// something only this machine controls.
//
// Host: allowed when it is an IP literal (rebinding needs a DNS name),
// "localhost" or a name under ".localhost", or one of `extra` (the operator's
// --allow-host; "*" allows any). Absent (HTTP/1.0): allowed.
// Origin (sent by browsers): allowed when absent, or when it is an http(s)
// origin whose host is loopback (localhost, 127.0.0.0/8, ::1), the address the
// server is bound to, or one of `extra`. "null" and other schemes are refused.
// Names compare case-insensitively; ports are ignored.

#include <string>
#include <string_view>
#include <vector>

namespace kvscope::server {

bool hostAllowed(std::string_view hostHeader, const std::vector<std::string>& extra);
bool originAllowed(std::string_view origin, std::string_view boundHost,
                   const std::vector<std::string>& extra);

}  // namespace kvscope::server
