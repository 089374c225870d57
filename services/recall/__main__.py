from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import check_startup, run_main, serve
from engram.service import load_settings
from engram.settings import CommonSettings
from services.recall.app import create_app
from services.recall.settings import RecallSettings


def main() -> None:
    settings, common = load_settings(RecallSettings), load_settings(CommonSettings)
    embedding = load_settings(EmbeddingSettings)

    def ready_to_start() -> None:
        preflight(embedding)
        check_startup(common, kafka=False, tokens=True)  # recall reads Postgres only

    serve(create_app(settings, common, embedding), settings.host, settings.port, ready_to_start)


run_main(main)
