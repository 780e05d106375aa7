"""HomieBot bringup: launch files, parameter files and the homiebot command-line tool (doctor, run, up, send-subtask, data, train)."""
