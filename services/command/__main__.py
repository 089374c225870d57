from engram.http import run_main, serve_service
from services.command.app import create_app
from services.command.settings import CommandSettings

run_main(lambda: serve_service(CommandSettings, create_app, master_key=True, tokens=True))
