"""PDFs (and large HTML pages) are read in a child process with hard limits: a PDF that would
take minutes of CPU is stopped at its CPU limit without the worker's own thread doing the
work, the source says which limit stopped it, and deleting or changing the source while the
child reads stops the child."""

from __future__ import annotations

import logging
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import override_settings

from apps.core import deadlines
from apps.knowledge.extract import ExtractError, extract
from apps.knowledge.models import Article, KnowledgeSource, SourceStatus
from apps.knowledge.services.sync import source_sync
from tests.factories import ClientFactory
from tests.support.fake_site import pdf_bytes
from tests.support.pdf_bomb import bomb_pdf

ROOT = Path(__file__).resolve().parents[2]
HTML = (
    b"<html><head><title>Opening hours</title></head><body><nav>Home | Shop | Help</nav>"
    b"<main><h1>Opening hours</h1><p>The shop is open Monday to Friday from nine to five."
    b"</p><p>On Saturdays we open from ten to two; on Sundays we are closed.</p></main>"
    b"<footer>Copyright Example Outdoor</footer></body></html>"
)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _file_source(client, name: str, data: bytes) -> KnowledgeSource:
    return KnowledgeSource.objects.create(
        client=client, name="Manual", kind="file", file=SimpleUploadedFile(name, data)
    )


@pytest.mark.django_db
@override_settings(KNOWLEDGE_EXTRACT_CPU_SECONDS=2, KNOWLEDGE_EXTRACT_SECONDS=600)
def test_a_pdf_bomb_is_stopped_at_its_cpu_limit_outside_the_worker_thread(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)
    client = ClientFactory()
    source = _file_source(client, "manual.pdf", pdf_bytes("Manual", "Keep the tent dry."))
    assert source_sync(source=source)["created"] == 1
    source.file = SimpleUploadedFile("manual-v2.pdf", bomb_pdf(pages=20))
    source.save()

    thread_cpu, children_cpu = time.thread_time(), _children_cpu()
    progress = source_sync(source=source)
    thread_cpu, children_cpu = time.thread_time() - thread_cpu, _children_cpu() - children_cpu

    # Reading the 20 pages takes 20 s of CPU or more; the child burned its 2 s and was killed,
    # while the calling thread only waited.
    assert children_cpu >= 1.5
    assert thread_cpu < 1.5
    source.refresh_from_db()
    message = "The document took more than 2 CPU seconds to read; it was stopped."
    assert source.status == SourceStatus.FAILED
    assert source.error == message
    assert progress["errors"] == [{"page": source.file.name, "error": message}]
    assert message in progress["message"]
    # Nothing lost: the article of the last good version is still there, unchanged.
    [article] = Article.objects.for_client(client).filter(source=source)
    assert (article.title, article.body, article.enabled) == ("Manual", "Keep the tent dry.", True)


@pytest.mark.django_db
def test_the_memory_output_and_wall_clock_limits_each_say_what_stopped_the_reading():
    normal = pdf_bytes("Care", "Dry the tent fully before you pack it away. " * 20)
    with (
        override_settings(KNOWLEDGE_EXTRACT_MEMORY_MB=1),
        pytest.raises(ExtractError, match=r"^The document needed more than 1 MB of memory"),
    ):
        extract(body=normal, content_type="application/pdf", name="care.pdf")
    with (
        override_settings(KNOWLEDGE_EXTRACT_OUTPUT_BYTES=300),
        pytest.raises(ExtractError, match=r"^The document's text is larger than 300 bytes"),
    ):
        extract(body=normal, content_type="application/pdf", name="care.pdf")
    with (
        override_settings(KNOWLEDGE_EXTRACT_CPU_SECONDS=600, KNOWLEDGE_EXTRACT_SECONDS=2),
        pytest.raises(ExtractError, match=r"^The document took more than 2 seconds to read"),
    ):
        extract(body=bomb_pdf(pages=200), content_type="application/pdf", name="bomb.pdf")
    with (
        override_settings(KNOWLEDGE_EXTRACT_CPU_SECONDS=600, KNOWLEDGE_EXTRACT_SECONDS=600),
        deadlines.deadline_scope(1.0),
        pytest.raises(ExtractError, match=r"^The sync's time limit was reached\.$"),
    ):  # never past what is left of the sync's own time
        extract(body=bomb_pdf(pages=200), content_type="application/pdf", name="bomb.pdf")
    # Within the limits the same PDF reads as before.
    page = extract(body=normal, content_type="application/pdf", name="care.pdf")
    assert (page.title, page.body) == (
        "Care",
        ("Dry the tent fully before you pack it away. " * 20).strip(),
    )


@pytest.mark.django_db
def test_a_limit_message_is_translated():
    from django.utils import translation

    with (
        translation.override("de"),
        override_settings(KNOWLEDGE_EXTRACT_MEMORY_MB=1),
        pytest.raises(ExtractError) as raised,
    ):
        extract(body=pdf_bytes("A", "b"), content_type="application/pdf", name="a.pdf")
    assert str(raised.value) == (
        "Das Dokument brauchte zum Lesen mehr als 1 MB Speicher; es wurde angehalten."
    )


@pytest.mark.django_db
def test_html_reads_the_same_in_the_child_as_in_this_process():
    in_process = extract(body=HTML, content_type="text/html", name="https://a.example/hours")
    with override_settings(KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES=0):
        in_child = extract(body=HTML, content_type="text/html", name="https://a.example/hours")
        # The child's limits apply to it: proof that the page went to the child.
        with (
            override_settings(KNOWLEDGE_EXTRACT_MEMORY_MB=1),
            pytest.raises(ExtractError, match="memory"),
        ):
            extract(body=HTML, content_type="text/html", name="https://a.example/hours")
    assert in_child == in_process
    assert in_child.title == "Opening hours"
    assert "Monday to Friday" in in_child.body
    assert "Home | Shop" not in in_child.body
    assert "Copyright" not in in_child.body
    with override_settings(KNOWLEDGE_EXTRACT_HTML_INLINE_BYTES=0), pytest.raises(ExtractError):
        extract(body=b"   ", content_type="text/html", name="https://a.example/empty")


def test_the_child_starts_without_django():
    probe = (
        "import sys, apps.knowledge.extract_child as child;"
        "child.read('pdf', sys.stdin.buffer.read());"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'config', 'celery'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=pdf_bytes("T", "text"),
        capture_output=True,
        cwd=ROOT,
        check=True,
    )
    assert done.stdout.decode().strip() == "[]"


@pytest.mark.django_db(transaction=True)
@override_settings(KNOWLEDGE_EXTRACT_CPU_SECONDS=600, KNOWLEDGE_EXTRACT_SECONDS=600)
@pytest.mark.parametrize("change", ["delete", "new file"])
def test_deleting_or_changing_the_source_stops_its_extraction(change, settings, tmp_path, caplog):
    settings.MEDIA_ROOT = str(tmp_path)
    client = ClientFactory()
    source = _file_source(client, "manual.pdf", bomb_pdf(pages=500))
    rows = KnowledgeSource.objects.for_client(client).filter(pk=source.pk)

    def staff() -> None:  # another request, on its own connection, while the sync reads
        try:
            while rows.values_list("progress__message", flat=True).first() != "Reading the file.":
                time.sleep(0.05)
            if change == "delete":
                rows.delete()
            else:
                rows.update(file="knowledge/manual-v2.pdf")
        finally:
            connection.close()

    other = threading.Thread(target=staff)
    other.start()
    children_cpu = _children_cpu()
    with caplog.at_level(logging.INFO, logger="apps.knowledge.sandbox"):
        progress = source_sync(source=source)
    other.join()
    children_cpu = _children_cpu() - children_cpu

    [stopped] = [r for r in caplog.records if r.getMessage().startswith("extract child stopped")]
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(stopped.pid, 0)
    # Stopped long before the CPU limit: reading all 500 pages takes minutes of CPU.
    assert children_cpu < 30
    assert not Article.objects.for_client(client).exists()
    if change == "delete":
        assert progress["stopped"] is True
        assert not rows.exists()
    else:
        source.refresh_from_db()
        assert source.status == SourceStatus.SYNCED
        assert source.error == "the source was changed while it was being read; sync it again."
        assert progress["failed"] == 0
