"""Links that let whoever holds them in: a signed or tokened query, an invitation, a
meeting, a file shared by link, a webhook. Part of the extractor's check for text that
gives access (``access.gives_access``); a plain link to a page is a fact."""

from __future__ import annotations

import re

# With a scheme, or "www.", or a bare host with a path ("example.com/reset?code=1"). A bare
# host starts where no host precedes it: tried from each label of a long dotted run
# ("a.a.a…"), it took time quadratic in its length (a 20,000-character turn took 5 s).
URL = re.compile(
    r"\b(?:https?|ftp)://\S+|\bwww\.\S+|"
    r"(?<![\w-])(?<![\w-]\.)[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}/\S*",
    re.IGNORECASE,
)
# Links whose path invites someone in: invitations (QA: "/invitations/" was kept), shares,
# resets, magic links.
ACCESS_PATH = re.compile(
    r"/(?:invite|invites|invited|invitations?|join|share|shared|s|j|w|reset|magic|token|auth|"
    r"oauth|login|signin|sso|verify|activate|unlock|meetup-join)\b",
    re.IGNORECASE,
)
# The same words inside a segment ("/team_invite/", "/shared_invite/", "/sharedalbum/"), a
# board's welcome link and a calendar's private address (each was kept).
INVITING = re.compile(
    r"invit|shar(?:e|ed|ing)(?![a-z])|sharedalbum|welcome-?onboard|magic[-_]?link|"
    r"/private-[0-9a-f]{16}",
    re.IGNORECASE,
)
# Links that let whoever holds them into a meeting, a call or a group chat, read against the
# host and the path together (QA: "meet.google.com/abc-defg-hij" was tested against the
# path alone, which never holds the host, so a Meet link was kept).
MEETING_LINK = re.compile(
    r"(?:[\w-]+\.)*(?:meet\.google\.com/[\w-]|zoom\.us/(?:j|my|s|w|wc)/|zoomgov\.com/j/|"
    r"teams\.microsoft\.com/l/meetup-join|teams\.live\.com/meet/|webex\.com/(?:meet|join)|"
    r"whereby\.com/[\w-]|meet\.jit\.si/[\w-]|meet\.goto\.com/|"
    r"gotomeeting\.com/join|bluejeans\.com/\d|chime\.aws/\d|join\.skype\.com/|"
    r"discord\.gg/|discord\.com/invite|chat\.whatsapp\.com/|join\.slack\.com/|"
    r"t\.me/(?:\+|joinchat))",
    re.IGNORECASE,
)
# A file or a folder shared by its link, which opens it to whoever has it, and a webhook,
# which lets whoever has it post ("dropbox.com/sh/…" and a SharePoint sharing link were
# kept; a Docs link was dropped only when its id happened to be long).
SHARE_LINK = re.compile(
    r"(?:[\w-]+\.)*(?:(?:docs|drive|sheets|slides|forms|photos)\.google\.com/"
    r"(?:[\w-]+/){0,3}(?:d|e|folders|share)/|photos\.app\.goo\.gl/|"
    r"dropbox\.com/(?:s|sh|scl|l|t|transfer)/|db\.tt/|1drv\.ms/|onedrive\.live\.com/|"
    r"[\w-]+\.sharepoint\.com/:[a-z]:/|box\.com/(?:s|v)/|we\.tl/|wetransfer\.com/downloads/|"
    r"hooks\.slack\.com/|discord(?:app)?\.com/api/webhooks/|hooks\.zapier\.com/|"
    r"[\w-]+\.webhook\.office\.com/)",
    re.IGNORECASE,
)
# A query that signs or authorises, found in the text whatever its link's shape
# ("example.com?token=…" has no path, so ``URL`` never reads it). The name is found first,
# bounded, and looked into after (a word between two open runs would backtrack).
QUERY_NAME = re.compile(r"[?&](?P<name>[\w.-]{1,64})=")
# A query name that carries a secret, as a whole name or its last part ("access_token",
# "X-Amz-Signature"); a part of a word is none ("author", "design", "keyboard", "postcode"
# were dropped: review).
SECRET_PARAM = re.compile(
    r"(?:^|[_.-])(?:token|sig|signature|secret|passw(?:or)?d|pwd|api_?key|key|code|auth|"
    r"credentials?|sas|rlkey)$|^usp$",
    re.IGNORECASE,
)
# A link said to open to whoever holds it: "anyone with the link can edit: https://…", "the
# invite link is https://…" (a plain link after either was kept).
LINK_SAID = re.compile(
    r"\banyone\s+with\s+(?:the|this|that|a)\s+link\b|\blink\s+sharing\b|"
    r"\b(?:invite|invitation|join|share|sharing|shareable|sharable|shared|public|secret|private|"
    r"magic|guest|access|edit|signup|sign-up)\s+links?\b",
    re.IGNORECASE,
)
# A host said without a path ("docs.example.com"), started as ``URL``'s bare host is.
BARE_HOST = re.compile(
    r"(?<![\w-])(?<![\w-]\.)[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|app|dev|co|so|site|me|ms|"
    r"ly|gl|link|page|to|us)\b",
    re.IGNORECASE,
)


def link_gives_access(text: str) -> bool:
    """A link in the text opens something to whoever holds it (``access_link``), a query
    carries a signature or a token, or the text says the link it gives does."""
    if any(access_link(m.group(0)) for m in URL.finditer(text)):
        return True
    if "=" in text and any(SECRET_PARAM.search(m.group("name")) for m in QUERY_NAME.finditer(text)):
        return True
    if "link" not in text.lower() or not LINK_SAID.search(text):
        return False
    return URL.search(text) is not None or BARE_HOST.search(text) is not None


def access_link(url: str) -> bool:
    """A link with credentials, a query or fragment (signatures, codes), an invite or a
    share in its path, or one of a meeting's, a file share's or a webhook's service."""
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    if "@" in host or "?" in rest or "#" in rest:
        return True
    if ACCESS_PATH.search("/" + path) or INVITING.search("/" + path):
        return True
    return bool(MEETING_LINK.match(rest) or SHARE_LINK.match(rest))
