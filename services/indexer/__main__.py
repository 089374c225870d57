from functools import partial

from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import run_main, serve_service
from engram.service import load_settings
from services.indexer.app import create_app
from services.indexer.settings import IndexerSettings


def main() -> None:
    embedding = load_settings(EmbeddingSettings)
    serve_service(
        IndexerSettings,
        partial(create_app, embedding=embedding),
        master_key=True,
        preflight=lambda: preflight(embedding),
    )


run_main(main)
