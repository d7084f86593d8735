"""The tenancy audit CI runs (scripts/tenancy_audit.py, `make tenancy` in `make ci-checks`):
clean on the tree, and failing on each kind of planted gap."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "tenancy_audit.py"
_spec = importlib.util.spec_from_file_location("tenancy_audit", SCRIPT)
assert _spec and _spec.loader
audit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit)


@pytest.fixture(autouse=True)
def _from_the_root(monkeypatch):
    monkeypatch.setattr(audit, "ROOT", ROOT)


def test_ci_runs_the_audit():
    makefile = (ROOT / "Makefile").read_text()
    ci_checks = next(line for line in makefile.splitlines() if line.startswith("ci-checks:"))
    assert "tenancy" in ci_checks.split()
    assert "scripts/tenancy_audit.py" in makefile
    assert "make ci-checks" in (ROOT / ".ci" / "run").read_text()


def test_the_tree_has_no_gap(capsys):
    assert audit.main([]) == 0
    out = capsys.readouterr().out
    assert "unscoped?" in out  # the table's header
    assert f"raw SQL: {len(audit.reviewed_sites())} reviewed sites" in out


GAPS = {
    "bare parent id": "Message.objects.filter(conversation_id=conversation_id).count()\n",
    "bare parent pk": "Message.objects.filter(conversation=message.conversation_id).count()\n",
    "bare parent ids": "Message.objects.filter(conversation__in=ids).count()\n",
    "no filter": "Message.objects.count()\n",
    "cursor": "with connection.cursor() as cursor:\n    cursor.execute('SELECT 1')\n",
    "raw": "Message.objects.raw('SELECT * FROM conversations_message')\n",
    "RawSQL": "Message.objects.annotate(x=RawSQL('SELECT 1', []))\n",
    "extra": "Message.objects.for_client(client).extra(where=['1=1'])\n",
    "base manager": "Message._base_manager.filter(conversation_id=1).update(text='')\n",
    "unreviewed site": "sql_rows('nobody.reviewed', 'SELECT 1', client_id=None)\n",
    "computed site": "sql_rows(name, 'SELECT 1', client_id=None)\n",
}


@pytest.mark.parametrize("code", GAPS.values(), ids=GAPS.keys())
def test_a_planted_gap_fails_the_audit(code, tmp_path, capsys):
    planted = tmp_path / "planted.py"
    planted.write_text(code)
    assert audit.main([str(planted)]) == 1
    assert "unaccounted for" in capsys.readouterr().err


SCOPED = {
    "for_client": "Message.objects.for_client(client).filter(conversation_id=pk).count()\n",
    "client beside the id": "Message.objects.filter(client=client, conversation_id=pk).count()\n",
    "loaded parent": "Message.objects.filter(conversation=conversation).count()\n",
    "scoped subquery": "Message.objects.filter(conversation__in=conversations).count()\n",
    "current client": "Message.objects.for_current_client().filter(conversation_id=pk)\n",
    "said why": "Message.objects.unscoped('the sweeper').filter(conversation_id=pk)\n",
    "reviewed site": "sql_rows('core.healthz', 'SELECT 1', client_id=None)\n",
}


@pytest.mark.parametrize("code", SCOPED.values(), ids=SCOPED.keys())
def test_accounted_for_sites_pass(code, tmp_path):
    planted = tmp_path / "fine.py"
    planted.write_text(code)
    assert audit.main([str(planted)]) == 0


def test_a_reviewed_site_nothing_runs_fails(monkeypatch):
    listed = audit.reviewed_sites() | {"nobody.runs"}
    monkeypatch.setattr(audit, "reviewed_sites", lambda: listed)
    gaps, used = audit.raw_sql_gaps([ROOT / "apps", ROOT / "devtools"], whole_tree=True)
    assert "core.healthz" in used
    assert gaps == [f"{audit.REVIEWED_MODULE}: reviewed SQL site 'nobody.runs' is run nowhere"]
