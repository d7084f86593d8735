from django.urls import path

from apps.notes.apis import NoteDetailApi, NoteExportApi, NoteImportApi, NoteListCreateApi

urlpatterns = [
    path("notes/", NoteListCreateApi.as_view(), name="api-note-list"),
    # before <note_id>/ so "export" and "import" are never taken for ids
    path("notes/export/", NoteExportApi.as_view(), name="api-note-export"),
    path("notes/import/", NoteImportApi.as_view(), name="api-note-import"),
    path("notes/<str:note_id>/", NoteDetailApi.as_view(), name="api-note-detail"),
]
