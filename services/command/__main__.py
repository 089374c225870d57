from engram.http import serve
from services.command.app import create_app
from services.command.settings import CommandSettings

settings = CommandSettings()
serve(create_app(settings), settings.host, settings.port)
