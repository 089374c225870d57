from engram.http import serve
from services.projector.app import create_app
from services.projector.settings import ProjectorSettings

settings = ProjectorSettings()
serve(create_app(settings), settings.host, settings.port)
