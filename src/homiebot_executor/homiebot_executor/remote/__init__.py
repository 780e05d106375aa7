"""The remote policy protocol (homiebot-policy/1): message types, an HTTP client and a loopback reference server."""
