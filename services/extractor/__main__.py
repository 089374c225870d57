from engram.http import check_startup, run_main, serve
from engram.service import load_settings
from engram.settings import CommonSettings
from services.extractor.app import create_app
from services.extractor.settings import ExtractorSettings


def main() -> None:
    settings, common = load_settings(ExtractorSettings), load_settings(CommonSettings)
    serve(
        create_app(settings, common),
        settings.host,
        settings.port,
        preflight=lambda: check_startup(common, tokens=True),
    )


run_main(main)
