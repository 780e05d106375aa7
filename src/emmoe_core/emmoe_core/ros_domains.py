"""ROS_DOMAIN_ID leases: a domain id held by one stack (or one test) on this machine at a time.

Stacks on one machine must never share a DDS domain, or their nodes meet. A lease is an exclusive `flock` on a file
per domain id in a folder shared by every process of the machine (`/tmp/homiebot-ros-domains` by default); the
kernel releases it when the holder exits, even after SIGKILL, so a crashed run never leaks a domain.
"""

from __future__ import annotations

import fcntl
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import IO

# Linux DDS domain ids whose port ranges are valid (0 is everyone's default, so it is never handed out).
DOMAIN_IDS: tuple[int, ...] = tuple(range(1, 102)) + tuple(range(215, 233))
LOCK_DIR = Path(os.environ.get("HOMIEBOT_DOMAIN_LOCK_DIR", "/tmp/homiebot-ros-domains"))


class NoFreeDomain(RuntimeError):
    """Every candidate domain id is held by another stack on this machine."""


class DomainLease:
    """An exclusive hold on one domain id; `release()` (or the process's exit) gives it back."""

    def __init__(self, domain_id: int, handle: IO[bytes]) -> None:
        self.domain_id = domain_id
        self._handle: IO[bytes] | None = handle

    def release(self) -> None:
        """Give the domain back (idempotent)."""
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> DomainLease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def try_lease(domain_id: int, lock_dir: Path = LOCK_DIR) -> DomainLease | None:
    """Hold `domain_id` when no other process on this machine does; None otherwise."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    handle = (lock_dir / f"{domain_id}.lock").open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return DomainLease(domain_id, handle)


def lease_domain(candidates: Sequence[int] = DOMAIN_IDS, lock_dir: Path = LOCK_DIR,
                 rng: random.Random | None = None) -> DomainLease:
    """Hold a free domain id, tried in random order among `candidates`.

    Raises:
        NoFreeDomain: when every candidate is held.
    """
    order = list(candidates)
    (rng or random.SystemRandom()).shuffle(order)
    for domain_id in order:
        lease = try_lease(domain_id, lock_dir)
        if lease is not None:
            return lease
    raise NoFreeDomain(f"all {len(order)} ROS domain ids are in use by other stacks on this machine "
                       f"(locks in {lock_dir})")
