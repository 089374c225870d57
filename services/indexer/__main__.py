from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import check_startup, run_main, serve
from engram.service import load_settings
from engram.settings import CommonSettings
from services.indexer.app import create_app
from services.indexer.settings import IndexerSettings


def main() -> None:
    settings, common = load_settings(IndexerSettings), load_settings(CommonSettings)
    embedding = load_settings(EmbeddingSettings)

    def ready_to_start() -> None:
        preflight(embedding)
        check_startup(common, master_key=True)

    serve(create_app(settings, common, embedding), settings.host, settings.port, ready_to_start)


run_main(main)
