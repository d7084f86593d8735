"""A private IMAP server for the tests: Debian's dovecot-imapd, started by the tests in a
temporary directory with its own configuration (`dovecot -F -c <file>`), plaintext login on
127.0.0.1 at a free port, one passwd-file user per mailbox, maildir storage. No TLS: the
channel's IMAP client talks plain IMAP to loopback hosts only (apps/mail/imap.py).

Run as an ordinary user, dovecot runs every process as that user. Run as root (a CI
container), its mail processes cannot be root, so it runs them as the `dovecot` system user
and the directory is handed to that user.

Mails are delivered by APPENDing them over IMAP (imap-tools), like any mail client.

Without dovecot the tests that need it skip with the reason, unless REQUIRE_MAIL_SERVERS=1
(CI: .ci/run installs dovecot-imapd) makes them fail."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from imap_tools import MailBoxUnencrypted

from apps.platform.local_server import free_port

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
START_SECONDS = 20.0


def dovecot_missing() -> str | None:
    """Why dovecot cannot run here, or None."""
    if not os.path.exists(DOVECOT) or not os.access(DOVECOT, os.X_OK):
        return "dovecot is not installed (Debian's dovecot-imapd)"
    return None


def require_dovecot() -> None:
    """Skip (or, with REQUIRE_MAIL_SERVERS=1, fail) when dovecot is missing."""
    reason = dovecot_missing()
    if reason is None:
        return
    if os.environ.get("REQUIRE_MAIL_SERVERS") == "1":
        pytest.fail(f"{reason}, and REQUIRE_MAIL_SERVERS=1")
    pytest.skip(reason)


@dataclass
class ImapServer:
    root: Path
    port: int
    uid: int
    gid: int
    host: str = "127.0.0.1"
    users: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    # --- accounts and mail ------------------------------------------------------------------

    def add_user(self, username: str, password: str) -> None:
        """A mailbox. Each user has a passwd file of its own (the path has `%u`): a new file
        is read at the next login, where a rewritten shared one could be taken as unchanged
        within the same second."""
        self.users[username] = password
        home = self.root / "home" / username
        home.mkdir(parents=True, exist_ok=True)
        line = f"{username}:{{PLAIN}}{password}:{self.uid}:{self.gid}::{home}::\n"
        (self.root / "users" / f"{username}.passwd").write_text(line)
        self._give_back(self.root / "home")
        self._give_back(self.root / "users")

    def mailbox(self, username: str) -> MailBoxUnencrypted:
        box = MailBoxUnencrypted(self.host, port=self.port, timeout=10)
        return box.login(username, self.users[username])

    def append(self, username: str, raw: bytes, *, folder: str = "INBOX") -> None:
        """Deliver one mail into the user's folder, as a mail client would (APPEND)."""
        with self.mailbox(username) as box:
            box.append(raw, folder)

    def seen_flags(self, username: str, *, folder: str = "INBOX") -> dict[int, bool]:
        """UID → whether the mail is flagged \\Seen."""
        with self.mailbox(username) as box:
            box.folder.set(folder, readonly=True)
            return {
                int(msg.uid or 0): "\\Seen" in msg.flags
                for msg in box.fetch(mark_seen=False, headers_only=True)
            }

    def change_uidvalidity(self, username: str) -> None:
        """Give the INBOX a new UIDVALIDITY, as a restored or rebuilt mailbox has: rewrite it
        in dovecot's UID list and drop the indexes built from the old one."""
        maildir = self.root / "home" / username / "Maildir"
        uidlist = maildir / "dovecot-uidlist"
        head, _, rest = uidlist.read_text().partition("\n")
        fields = [
            f"V{int(part[1:]) + 1000}" if part.startswith("V") else part for part in head.split()
        ]
        uidlist.write_text(" ".join(fields) + "\n" + rest)
        for name in ("dovecot.index", "dovecot.index.cache", "dovecot.index.log"):
            with contextlib.suppress(FileNotFoundError):
                (maildir / name).unlink()

    # --- the process --------------------------------------------------------------------------

    def _give_back(self, path: Path) -> None:
        if os.getuid() == 0:
            for dirpath, dirnames, filenames in os.walk(path):
                os.chown(dirpath, self.uid, self.gid)
                for name in dirnames + filenames:
                    os.chown(os.path.join(dirpath, name), self.uid, self.gid)

    def write_config(self) -> Path:
        user = pwd.getpwuid(self.uid).pw_name
        group_line = f"default_internal_group = {_group_name(self.gid)}"
        config = f"""
base_dir = {self.root}/run
state_dir = {self.root}/state
log_path = {self.root}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {user}
{group_line}
default_login_user = {user}
first_valid_uid = {self.uid}
last_valid_uid = {self.uid}
first_valid_gid = {self.gid}
last_valid_gid = {self.gid}
mail_location = maildir:~/Maildir
mail_plugins =
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.root}/users/%u.passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {self.root}/users/%u.passwd
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service anvil {{
  chroot =
}}
service auth {{
  user = {user}
}}
service auth-worker {{
  user = {user}
}}
"""
        path = self.root / "dovecot.conf"
        path.write_text(config)
        return path

    def start(self) -> None:
        for sub in ("run", "state", "home", "users"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        config = self.write_config()
        self._give_back(self.root)
        if os.getuid() == 0:
            os.chown(self.root, self.uid, self.gid)
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                output = self.process.stdout.read().decode() if self.process.stdout else ""
                raise RuntimeError(f"dovecot exited: {output}\n{self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as sock:
                    if sock.recv(200).startswith(b"* OK"):
                        return
            except OSError:
                pass
            time.sleep(0.05)  # polling for the port: dovecot signals nothing else
        self.stop()
        raise RuntimeError(f"dovecot did not open port {self.port}: {self.log()}")

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process.stdout:
            self.process.stdout.close()
        self.process = None


def _group_name(gid: int) -> str:
    import grp

    return grp.getgrgid(gid).gr_name


@contextlib.contextmanager
def running_imap_server() -> Iterator[ImapServer]:
    require_dovecot()
    if os.getuid() == 0:
        account = pwd.getpwnam("dovecot")
        uid, gid = account.pw_uid, account.pw_gid
    else:
        uid, gid = os.getuid(), os.getgid()
    root = Path(tempfile.mkdtemp(prefix="guidedesk-dovecot-"))
    server = ImapServer(root=root, port=free_port(), uid=uid, gid=gid)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def imap_server() -> Iterator[ImapServer]:
    """One dovecot for the session; each test adds its own mailbox (`imap_account`)."""
    with running_imap_server() as server:
        yield server


@pytest.fixture
def imap_account(imap_server: ImapServer, request: pytest.FixtureRequest) -> tuple[str, str]:
    """A fresh mailbox (user, password) on the session's dovecot."""
    name = f"u{abs(hash(request.node.nodeid)) % 10**10}x{len(imap_server.users)}"
    password = f"pw-{name}"
    imap_server.add_user(name, password)
    return name, password
