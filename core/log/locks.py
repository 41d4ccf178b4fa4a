"""Does the filesystem under a shared directory honour the writers' lock between machines?

Every node appends under an exclusive `flock` of the log file (and takes fleet leases under one); on a
filesystem where that lock is local to one machine, two nodes would both believe they hold it and write
two records at one seq. So a node refuses to start on such a filesystem rather than corrupt the log.

Two checks: the filesystem's type and mount options (Linux: /proc/self/mountinfo) against what is known
to carry flock between machines, and a probe that a second opener really is excluded while the lock is
held (which catches a filesystem that silently grants every lock). Neither can prove that two machines
exclude each other; the type check is what refuses the common lock-less network filesystems.
"""
from __future__ import annotations

import errno
import fcntl
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import CrewletError

TRUST_ENV = "CREWLET_TRUST_LOCKS"   # =1: start on a filesystem type this build does not know

# local filesystems: one machine, flock is the kernel's own
LOCAL = {"ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "ramfs", "f2fs", "jfs", "reiserfs", "bcachefs",
         "overlay", "nilfs2", "vfat", "exfat", "ntfs", "ntfs3", "hfsplus", "apfs", "ufs", "ecryptfs"}
# network and cluster filesystems whose Linux clients carry flock to the server (NFS as POSIX locks over
# NLM/NFSv4, SMB as byte-range locks, the cluster filesystems through their lock managers)
NETWORK = {"nfs", "nfs4", "cifs", "smb3", "ceph", "fuse.ceph", "lustre", "gpfs", "fuse.glusterfs", "glusterfs",
           "ocfs2", "gfs2", "beegfs", "fuse.beegfs"}
# known to keep locks on one machine, or to have none
NO_LOCKS = {"fuse.sshfs": "sshfs keeps locks on the machine that takes them",
            "vboxsf": "VirtualBox shared folders have no file locks",
            "9p": "9p shares keep locks on the guest", "virtiofs": "virtiofs keeps flock inside one guest",
            "davfs": "WebDAV mounts have no file locks", "fuse.davfs": "WebDAV mounts have no file locks",
            "fuse.rclone": "rclone mounts keep locks on one machine", "fuse.s3fs": "s3fs has no file locks",
            "fuse.gcsfuse": "gcsfuse has no file locks", "fuse.goofys": "goofys has no file locks",
            "afs": "AFS whole-file locks are advisory per client"}
# mount options that make an otherwise sound filesystem keep locks local
LOCAL_LOCK_OPTIONS = {"nolock": "mounted with nolock", "local_lock=flock": "mounted with local_lock=flock",
                      "local_lock=all": "mounted with local_lock=all", "nobrl": "mounted with nobrl"}


@dataclass(frozen=True)
class LockCheck:
    path: Path
    fstype: str            # "" where the platform does not say
    mount_point: str
    ok: bool
    why: str               # one line: why it is sound, or why it is refused

    def to_json(self) -> dict[str, object]:
        return {"path": str(self.path), "fstype": self.fstype, "mount_point": self.mount_point, "ok": self.ok,
                "why": self.why}


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_of(path: Path) -> tuple[str, str, set[str]]:
    """(filesystem type, mount point, mount and superblock options) of the mount holding `path`
    (Linux); ("", "", set()) where /proc/self/mountinfo cannot be read."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "", "", set()
    target = str(path.resolve())
    best: tuple[str, str, set[str]] = ("", "", set())
    best_len = -1
    for line in lines:
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or not tail:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and len(point) > best_len:  # the last, longest mount point wins (later mounts shadow)
            options = set(fields[5].split(",")) | (set(tail[2].split(",")) if len(tail) > 2 else set())
            best, best_len = (tail[0], point, options), len(point)
    return best


def probe_flock(directory: Path) -> str | None:
    """None when an exclusive flock held on one open file keeps a second opener out; else why not."""
    # a file of this process alone: two nodes opening at once must not take each other's probe lock for
    # a filesystem that refuses locks (it was one shared name, and a second opener was refused)
    probe = directory / f".lock-probe.{os.getpid()}.{os.urandom(4).hex()}"
    try:
        first = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return None  # a directory this process cannot write: it appends nothing there, so nothing to corrupt
        return f"cannot create {probe} ({exc.strerror or exc})"
    try:
        try:
            fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return f"flock is not supported there ({exc.strerror or exc})"
            return f"flock failed there ({exc.strerror or exc})"
        second = os.open(probe, os.O_RDWR)
        try:
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # excluded, as it must be
        except OSError as exc:
            return f"flock failed there ({exc.strerror or exc})"
        finally:
            os.close(second)
        return "a second opener took the lock while it was held: locks are not enforced there"
    finally:
        os.close(first)
        probe.unlink(missing_ok=True)


def check(directory: Path, *, probe: bool = True) -> LockCheck:
    """Is `directory` a place several nodes may share? See the module docstring."""
    fstype, point, options = mount_of(directory)
    if fstype:
        bad = [why for opt, why in LOCAL_LOCK_OPTIONS.items() if opt in options]
        if fstype in NO_LOCKS:
            return LockCheck(directory, fstype, point, False, f"{fstype}: {NO_LOCKS[fstype]}")
        if bad and fstype not in LOCAL:
            return LockCheck(directory, fstype, point, False, f"{fstype} {bad[0]}: its locks stay on this machine")
        if fstype not in LOCAL and fstype not in NETWORK and os.environ.get(TRUST_ENV) != "1":
            return LockCheck(directory, fstype, point, False,
                             f"{fstype} is not a filesystem this build knows to carry flock between machines "
                             f"(set {TRUST_ENV}=1 if it does)")
    elif sys.platform.startswith("linux"):
        return LockCheck(directory, "", "", False, f"the filesystem of {directory} cannot be told (no /proc/self/mountinfo)")
    if probe:
        problem = probe_flock(directory)
        if problem:
            return LockCheck(directory, fstype, point, False, problem)
    kind = ("local" if fstype in LOCAL else "network, locks carried to the server" if fstype in NETWORK
            else "trusted by " + TRUST_ENV if fstype else "not told by this platform")
    return LockCheck(directory, fstype, point, True, f"{fstype or 'filesystem'} ({kind}); flock excludes a second opener")


def require(directory: Path, *, probe: bool = True) -> LockCheck:
    """`check`, refusing with one line naming the directory, the reason and the fix."""
    result = check(directory, probe=probe)
    if not result.ok:
        raise CrewletError(f"refusing to use {directory} as a shared directory: {result.why} — two nodes could write "
                           "the same record number; put it on a local disk, NFS or SMB with locking, or a cluster "
                           "filesystem (see the README's Replication section)", code="locks_unsupported",
                           fstype=result.fstype)
    return result
