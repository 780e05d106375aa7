"""Skill policies: privileged (M3, on the simulator backend) and remote (learned policies over HTTP)."""
