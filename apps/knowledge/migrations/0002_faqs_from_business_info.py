"""Every client's `business_info["faqs"]` becomes FAQ articles (published, enabled, in the
client's language, indexed as one chunk each) and the key leaves the JSON; the reverse puts the
usable FAQ articles back into the JSON, in the order they were created. Nothing is lost either
way: the questions and answers are copied as they are."""

import hashlib

from django.db import migrations


def _language(code):
    return (code or "").strip().lower().replace("_", "-").split("-")[0]


def _hash(title, body):
    return hashlib.sha256(f"{title.strip()}\n{body.strip()}".encode()).hexdigest()


def faqs_to_articles(apps, schema_editor):
    Client = apps.get_model("clients", "Client")
    Article = apps.get_model("knowledge", "Article")
    ArticleChunk = apps.get_model("knowledge", "ArticleChunk")
    postgres = schema_editor.connection.vendor == "postgresql"
    for client in Client.objects.order_by("pk").iterator():
        info = client.business_info
        if not isinstance(info, dict) or "faqs" not in info:
            continue
        language = _language(client.language)
        for faq in info["faqs"] if isinstance(info["faqs"], list) else []:
            if not isinstance(faq, dict):
                continue
            question = str(faq.get("question") or "").strip()
            answer = str(faq.get("answer") or "").strip()
            if not question or not answer:
                continue
            content_hash = _hash(question, answer)
            article = Article.objects.create(
                client_id=client.pk,
                kind="faq",
                title=question,
                body=answer,
                language=language,
                tags=[],
                enabled=True,
                status="published",
                content_hash=content_hash,
                indexed_hash=content_hash,
            )
            ArticleChunk.objects.create(
                client_id=client.pk,
                article=article,
                ordinal=0,
                heading=question[:300],
                text=answer,
                tokens=max(1, len(answer) // 4),
                language=language,
            )
        rest = {key: value for key, value in info.items() if key != "faqs"}
        Client.objects.filter(pk=client.pk).update(business_info=rest)
    if postgres:
        from django.contrib.postgres.search import SearchVector

        from apps.notes.textsearch import search_config_for

        for language in ArticleChunk.objects.values_list("language", flat=True).distinct():
            config = search_config_for(language)
            ArticleChunk.objects.filter(
                language=language, article__kind="faq", search_vector__isnull=True
            ).update(
                search_vector=SearchVector("heading", weight="A", config=config)
                + SearchVector("text", weight="B", config=config)
            )


def articles_to_faqs(apps, schema_editor):
    Client = apps.get_model("clients", "Client")
    Article = apps.get_model("knowledge", "Article")
    for client in Client.objects.order_by("pk").iterator():
        info = client.business_info if isinstance(client.business_info, dict) else {}
        if "faqs" in info:
            continue
        rows = Article.objects.filter(
            client_id=client.pk, kind="faq", status="published", enabled=True
        ).order_by("pk")
        faqs = [{"question": a.title, "answer": a.body} for a in rows]
        if not faqs:
            continue
        Client.objects.filter(pk=client.pk).update(business_info={**info, "faqs": faqs})
        rows.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="FAQ",
            fields=[],
            options={
                "verbose_name": "FAQ",
                "verbose_name_plural": "FAQs",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("knowledge.article",),
        ),
        migrations.RunPython(faqs_to_articles, articles_to_faqs),
    ]
