from functools import partial

from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import run_main, serve_service
from engram.service import load_settings
from services.recall.app import create_app
from services.recall.settings import RecallSettings


def main() -> None:
    embedding = load_settings(EmbeddingSettings)
    serve_service(
        RecallSettings,
        partial(create_app, embedding=embedding),
        kafka=False,  # recall reads Postgres only
        tokens=True,
        preflight=lambda: preflight(embedding),
    )


run_main(main)
