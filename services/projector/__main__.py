from engram.http import check_startup, run_main, serve
from engram.service import load_settings
from engram.settings import CommonSettings
from services.projector.app import create_app
from services.projector.settings import ProjectorSettings


def main() -> None:
    settings, common = load_settings(ProjectorSettings), load_settings(CommonSettings)
    serve(
        create_app(settings, common),
        settings.host,
        settings.port,
        preflight=lambda: check_startup(common, master_key=True),
    )


run_main(main)
