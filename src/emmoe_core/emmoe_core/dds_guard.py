"""The loopback rule for DDS: no node or CLI of the project starts unless its DDS traffic stays on this machine.

Two configurations keep it there (docs/deployment.md, README "Network and secrets"):
- `ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT` with the project's loopback Fast DDS profile loaded (the default:
  env.sh, `homiebot up/run`, the launch file and the test fixtures set both). rmw_fastrtps then applies the profile
  untouched, so every DDS socket is bound to 127.0.0.1;
- `ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`: rmw_fastrtps confines discovery to this machine itself (it adds a UDP
  transport of its own, whose send-only sockets are bound to 0.0.0.0 and the external address).

Every other range (SUBNET, OFF, unset: Kilted's default is SUBNET) is refused, and so is SYSTEM_DEFAULT when the
profile is not loaded. "Loaded" means (`profile_problems`): FASTDDS_DEFAULT_PROFILES_FILE names one readable XML file
(SKIP_DEFAULT_XML unset) whose single default participant profile has `useBuiltinTransports` false, only UDPv4 or
SHM user transports, each UDPv4 one with an interface allowlist of exactly 127.0.0.1, non-empty metatraffic and
default unicast locator lists and initial peers, every locator in the file on 127.0.0.1, and no multicast locator;
and RMW_IMPLEMENTATION is rmw_fastrtps_cpp or unset (Kilted's default is rmw_fastrtps_cpp). Whatever the range,
ROS_DISCOVERY_SERVER and FASTDDS_ENVIRONMENT_FILE must be unset (they redirect discovery) and ROS_STATIC_PEERS may
name loopback addresses only.

A robot on a LAN is an explicit opt-in (docs/deployment.md, "Robot LAN"): LAN_INTERFACE_VARIABLE names this
machine's address on that LAN; the profile's allowlist and unicast locators may then name it besides 127.0.0.1,
and its initial peers (and ROS_STATIC_PEERS) the addresses of LAN_PEERS_VARIABLE. Everything else stays as strict.
"""

from __future__ import annotations

import ipaddress
import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from pathlib import Path

RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
RMW_VARIABLE = "RMW_IMPLEMENTATION"
# Robot-LAN opt-in: this machine's address on the robot's network, and the peers it may announce itself to.
LAN_INTERFACE_VARIABLE = "HOMIEBOT_DDS_LAN_INTERFACE"
LAN_PEERS_VARIABLE = "HOMIEBOT_DDS_LAN_PEERS"

DEFAULT_RANGE = "SYSTEM_DEFAULT"
ACCEPTED_RANGES = ("SYSTEM_DEFAULT", "LOCALHOST")
FASTRTPS = "rmw_fastrtps_cpp"  # also what Kilted loads when RMW_IMPLEMENTATION is unset
LOOPBACK = "127.0.0.1"
PROFILE_FILE = "fastdds_loopback.xml"
ACCEPTED_TRANSPORTS = ("UDPv4", "SHM")
MAX_PROFILE_BYTES = 1 << 20
# Variables that make Fast DDS skip the profile or discover through other machines, whatever the range.
FORBIDDEN_VARIABLES = ("ROS_DISCOVERY_SERVER", "FASTDDS_ENVIRONMENT_FILE")


class DiscoveryNotConfined(RuntimeError):
    """DDS traffic could leave this machine with this environment: no node may start."""


def _local(tag: str) -> str:
    """An element's name without its XML namespace."""
    return tag.rsplit("}", 1)[-1]


def _children(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [child for child in element if _local(child.tag) == name]


def _child(element: ElementTree.Element | None, name: str) -> ElementTree.Element | None:
    if element is None:
        return None
    found = _children(element, name)
    return found[0] if found else None


def _descendants(element: ElementTree.Element, name: str) -> list[ElementTree.Element]:
    return [node for node in element.iter() if _local(node.tag) == name]


def _children_of(element: ElementTree.Element | None, name: str) -> list[ElementTree.Element]:
    return [] if element is None else _children(element, name)


def _descendants_of(element: ElementTree.Element | None, name: str) -> list[ElementTree.Element]:
    return [] if element is None else _descendants(element, name)


def _text(element: ElementTree.Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""


def _locator_addresses(locator_list: ElementTree.Element | None) -> list[str] | None:
    """The address of each locator of a list (None for a locator that is not UDPv4 with an address)."""
    if locator_list is None:
        return []
    addresses: list[str] = []
    for locator in _children(locator_list, "locator"):
        kinds = [child for child in locator if isinstance(child.tag, str)]
        if len(kinds) != 1 or _local(kinds[0].tag) != "udpv4" or not _text(_child(kinds[0], "address")):
            return None
        addresses.append(_text(_child(kinds[0], "address")))
    return addresses


def lan_addresses(environ: Mapping[str, str]) -> tuple[set[str], set[str], list[str]]:
    """(interface addresses allowed, peer addresses allowed, problems) from the robot-LAN opt-in variables."""
    interfaces, peers, problems = {LOOPBACK}, {LOOPBACK}, []
    interface = environ.get(LAN_INTERFACE_VARIABLE, "").strip()
    peer_text = environ.get(LAN_PEERS_VARIABLE, "").strip()
    if peer_text and not interface:
        problems.append(f"{LAN_PEERS_VARIABLE} is set without {LAN_INTERFACE_VARIABLE}")
    if interface:
        for name, text in [(LAN_INTERFACE_VARIABLE, interface)] + [
                (LAN_PEERS_VARIABLE, part.strip()) for part in peer_text.split(",") if part.strip()]:
            try:
                address = ipaddress.IPv4Address(text)
            except ValueError:
                problems.append(f"{name}: {text!r} is not an IPv4 address")
                continue
            if address.is_multicast or address.is_unspecified or address.is_loopback:
                problems.append(f"{name}: {text} is not a unicast LAN address")
            elif name == LAN_INTERFACE_VARIABLE:
                interfaces.add(text)
            else:
                peers.add(text)
        peers |= interfaces
    return interfaces, peers, problems


def profile_problems(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """Why the Fast DDS profile file at `path` does not keep every DDS socket on loopback ([] when it does).

    `environ` holds the robot-LAN opt-in variables (default: os.environ); without them only 127.0.0.1 is allowed.
    """
    environ = os.environ if environ is None else environ
    interfaces, peers, problems = lan_addresses(environ)
    if problems:
        return problems
    file = Path(path)
    try:
        if not file.is_file():  # a FIFO or a device would block the read
            return ["it is not a regular file" if file.exists() else "it does not exist"]
        if file.stat().st_size > MAX_PROFILE_BYTES:
            return [f"it is larger than {MAX_PROFILE_BYTES} bytes"]
        root = ElementTree.fromstring(file.read_bytes())
    except OSError as error:
        return [f"it cannot be read ({error.strerror or error})"]
    except ElementTree.ParseError as error:
        return [f"it is not well-formed XML ({error})"]
    if _local(root.tag) == "dds":
        profile_sets = _children(root, "profiles")
    elif _local(root.tag) == "profiles":
        profile_sets = [root]
    else:
        return [f"its root element is <{_local(root.tag)}>, not <dds> or <profiles>"]
    participants = [participant for profiles in profile_sets for participant in _children(profiles, "participant")
                    if participant.get("is_default_profile", "").strip().lower() == "true"]
    if len(participants) != 1:
        return [f"it declares {len(participants)} default participant profiles (is_default_profile=\"true\"), "
                "not exactly one"]
    rtps = _child(participants[0], "rtps")
    if rtps is None:
        return ["its default participant profile has no <rtps> settings"]
    problems = []
    if _text(_child(rtps, "useBuiltinTransports")).lower() != "false":
        problems.append("useBuiltinTransports is not false (Fast DDS's built-in transports bind every interface)")
    descriptors = {_text(_child(descriptor, "transport_id")): descriptor for profiles in profile_sets
                   for descriptors in _children(profiles, "transport_descriptors")
                   for descriptor in _children(descriptors, "transport_descriptor")}
    transport_ids = [_text(transport) for transport in _descendants_of(_child(rtps, "userTransports"), "transport_id")]
    if not transport_ids:
        problems.append("no userTransports")
    for transport_id in transport_ids:
        descriptor = descriptors.get(transport_id)
        if descriptor is None:
            problems.append(f"user transport {transport_id!r} has no transport_descriptor")
            continue
        kind = _text(_child(descriptor, "type"))
        if kind not in ACCEPTED_TRANSPORTS:
            problems.append(f"transport {transport_id!r} is {kind or 'untyped'}, not one of "
                            f"{', '.join(ACCEPTED_TRANSPORTS)}")
            continue
        if kind == "UDPv4":
            allowlist = _child(descriptor, "interfaceWhiteList")
            allowed = [_text(entry) for entry in _children_of(allowlist, "address")]
            allowed += [_text(entry) for entry in _children_of(allowlist, "interface")]
            allowed += [entry.get("name", "").strip() for entry in
                        _children_of(_child(_child(descriptor, "interfaces"), "allowlist"), "interface")]
            if not allowed or not set(allowed) <= interfaces:
                expected = ("exactly 127.0.0.1" if interfaces == {LOOPBACK} else
                            f"within {', '.join(sorted(interfaces))}")
                problems.append(f"UDPv4 transport {transport_id!r} allows interfaces {allowed or 'all'}, not "
                                f"{expected}")
    builtin = _child(rtps, "builtin")
    for owner, name, accepted in ((builtin, "metatrafficUnicastLocatorList", interfaces),
                                  (rtps, "defaultUnicastLocatorList", interfaces),
                                  (builtin, "initialPeersList", peers)):
        addresses = _locator_addresses(_child(owner, name))
        if addresses is None:
            problems.append(f"{name} holds a locator that is not a UDPv4 address")
        elif not addresses:
            problems.append(f"{name} is missing or empty (it must name 127.0.0.1)")
        elif not set(addresses) <= accepted:
            problems.append(f"{name} names {', '.join(sorted(set(addresses) - accepted))}, not only "
                            f"{', '.join(sorted(accepted))}")
    for owner, name in ((builtin, "metatrafficMulticastLocatorList"), (rtps, "defaultMulticastLocatorList")):
        found = _child(owner, name)
        if found is not None and _children(found, "locator"):
            problems.append(f"{name} is not empty (multicast must stay off)")
    stray = sorted({_text(address) for profiles in profile_sets for address in _descendants(profiles, "address")
                    if _text(address) and _text(address) not in peers})
    if stray:
        problems.append(f"the file names addresses other than {', '.join(sorted(peers))}: {', '.join(stray)}")
    return problems


def default_profile_hint(environ: Mapping[str, str]) -> str:
    """Where the project's loopback profile is, for the message (the installed copy, else the source tree)."""
    candidates: list[Path] = []
    for prefix in environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            candidates.append(Path(prefix) / "share" / "homiebot" / "config" / PROFILE_FILE)
    if environ.get("HOMIEBOT_ROOT"):
        candidates.append(Path(environ["HOMIEBOT_ROOT"]) / "src" / "homiebot" / "config" / PROFILE_FILE)
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    return f"<checkout>/src/homiebot/config/{PROFILE_FILE}"


def what_to_set(environ: Mapping[str, str]) -> str:
    """The fix every refusal names."""
    return (f"set {RANGE_VARIABLE}=SYSTEM_DEFAULT and {PROFILE_VARIABLE}={default_profile_hint(environ)} "
            f"(`. env.sh` sets both), or {RANGE_VARIABLE}=LOCALHOST")


def discovery_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why no node may start with this environment, without the fix (None when one may)."""
    environ = os.environ if environ is None else environ
    value = environ.get(RANGE_VARIABLE, "")
    if value not in ACCEPTED_RANGES:
        shown = f"={value}" if value else " is unset (Kilted then uses SUBNET)"
        return f"{RANGE_VARIABLE}{shown}, not {' or '.join(ACCEPTED_RANGES)}"
    problems: list[str] = []
    for name in FORBIDDEN_VARIABLES:
        if environ.get(name, "").strip():
            problems.append(f"{name} is set (it sends discovery elsewhere); unset it")
    _, peers, lan_problems = lan_addresses(environ)
    problems += lan_problems
    static = [peer.strip() for peer in environ.get("ROS_STATIC_PEERS", "").replace(",", ";").split(";")
              if peer.strip()]
    if [peer for peer in static if peer not in peers | {"localhost", "::1"}]:
        problems.append(f"ROS_STATIC_PEERS={environ['ROS_STATIC_PEERS']} names other machines; unset it")
    if value == "SYSTEM_DEFAULT":
        rmw = environ.get(RMW_VARIABLE, "").strip()
        if rmw not in ("", FASTRTPS):
            problems.append(f"{RMW_VARIABLE}={rmw}, but the loopback profile is a Fast DDS profile ({FASTRTPS})")
        if environ.get("SKIP_DEFAULT_XML", "").strip() not in ("", "0"):
            problems.append("SKIP_DEFAULT_XML is set, so Fast DDS loads no profile; unset it")
        profile = environ.get(PROFILE_VARIABLE, "").strip()
        if not profile:
            problems.append(f"{PROFILE_VARIABLE} is not set, so Fast DDS would multicast discovery on every "
                            "interface")
        elif not lan_problems:
            found = profile_problems(profile, environ)
            if found:
                problems.append(f"{PROFILE_VARIABLE}={profile} is not a loopback-only profile: {'; '.join(found)}")
    if not problems:
        return None
    return f"with {RANGE_VARIABLE}={value} DDS traffic could leave this machine: {'; '.join(problems)}"


def discovery_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why no node may start with this environment, as one message saying what to set (None when one may)."""
    environ = os.environ if environ is None else environ
    reason = discovery_reason(environ)
    return None if reason is None else f"refusing to start ROS 2 nodes: {reason}. To fix: {what_to_set(environ)}"


def require_loopback_dds(environ: Mapping[str, str] | None = None) -> None:
    """Raise DiscoveryNotConfined (its message says what to set) unless nodes may start with this environment."""
    problem = discovery_problem(environ)
    if problem is not None:
        raise DiscoveryNotConfined(problem)


def loopback_environment(profile: str | os.PathLike[str]) -> dict[str, str]:
    """The project's default DDS environment for a node: SYSTEM_DEFAULT with the loopback profile at `profile`."""
    return {RANGE_VARIABLE: DEFAULT_RANGE, PROFILE_VARIABLE: str(profile)}
