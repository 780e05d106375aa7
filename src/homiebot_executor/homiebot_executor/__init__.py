"""HomieBot low-level execution: name mapping, error detection, skill policies, the /subtask executor and skill action servers."""
