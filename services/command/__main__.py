from engram.http import check_startup, run_main, serve
from engram.service import load_settings
from engram.settings import CommonSettings
from services.command.app import create_app
from services.command.settings import CommandSettings


def main() -> None:
    settings, common = load_settings(CommandSettings), load_settings(CommonSettings)
    serve(
        create_app(settings, common),
        settings.host,
        settings.port,
        preflight=lambda: check_startup(common, master_key=True, tokens=True),
    )


run_main(main)
