"""A login given with its secret: an account and its password side by side, a connection
string or a command line that carries one, an Authorization header. Part of the
extractor's check for text that gives access (``access.gives_access``)."""

from __future__ import annotations

import re

DIGIT, LETTER = re.compile(r"\d"), re.compile(r"[A-Za-z]")
# An account and its secret given together: "root@10.0.0.5 using hunter2", "the account is
# ana@example.com with sunshine99" (QA: both were proposed), "the account ana@example.com
# uses sunshine99" (QA: proposed), "ana@example.com / hunter2", "ana@example.com:hunter2".
# An address alone is contact data ("write to ana@example.com with Q3 results", "contact
# ana@example.com with your account questions": QA, both wrongly dropped), so an email with a
# word after it counts only where the word reads as a secret (letters and digits, or a
# symbol) and the text speaks of an account or a login or the word ends the clause; a user
# at an address or a one-word host ("root@10.0.0.5", "admin@nas") is a login wherever it
# stands. Joined by "/" or ":", a second email is a second address ("billing@acme.com /
# finance@acme.com", QA: wrongly dropped); a ":" before a path ("git@github.com:acme/app.git") or a
# port ("root@10.0.0.5:22") gives no secret. The name before "@" starts where no name
# precedes it, so a long word is read once.
CREDENTIAL_PAIR = re.compile(
    r"(?<![\w.+-])[\w.+-]+@(?P<host>[\w-]+(?:\.[\w-]+)*)(?::\d+\b)?"
    r"(?:\s+(?:using|with|uses?)\s+|(?P<joined>\s+/\s+|:(?!\d+\b)(?=[^\s/]+(?:\s|$))))"
    r"(?P<secret>\S+)",
    re.IGNORECASE,
)
LOGIN_HOST = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|[\w-]+")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
SYMBOL = re.compile(r"[!#$%^&*+=~|<>]")
TRAILING = ".,;:!?)]'\""
CLAUSE_END = re.compile(r"\s*(?:$|[.!?,;:)\n]|(?:and|or|but|then)\b)", re.IGNORECASE)
ACCOUNT = re.compile(
    r"\b(?:accounts?|log(?:ging|ged)?[\s-]?ins?|sign(?:ing|ed)?[\s-]?ins?|user\s?names?|ssh|"
    r"sftp|servers?|reachable|vpn|portal)\b",
    re.IGNORECASE,
)
# A user and a secret joined by "/" ("admin / sunshine", QA: proposed) where the text speaks
# of a login or the user is one of the usual accounts; "tea / coffee" and "read/write" say
# none. Unspaced ("req/s", "TCP/IP"), the second must read as a secret. A word followed by
# another "/" is a path's. Possessive runs: a long word is read once.
SLASH_PAIR = re.compile(
    r"(?<![\w.+@/:-])(?P<user>[A-Za-z_][\w.+-]*+)(?:(?P<spaced>\s+/\s+)|/)"
    r"(?P<secret>[^\s/]++)(?!/)"
)
USUAL_USER = re.compile(r"admin(?:istrator)?|root|superuser|sysadmin|guest", re.IGNORECASE)
# "log in as admin with sunshine" (QA: proposed); "... with the SSO button" names no secret.
LOGIN_AS = re.compile(
    r"\b(?:log(?:s|ged|ging)?|sign(?:s|ed|ing)?)[\s-]?(?:in|on|into)\s+as\s+\S+\s+"
    r"(?:with|using|via)\s+(?!(?:the|your|my|our|their|his|her|its|a|an)\b)\S",
    re.IGNORECASE,
)
# A login typed with its secret after it: "ssh admin@nas hunter" (QA: proposed). A word
# that joins the clause ("to", "and", "-p") is no secret; a remote command errs as one.
SHELL_LOGIN = re.compile(
    r"\b(?:ssh|sftp|mosh|telnet)\s+(?:-\w+\s+(?:\d+\s+)?){0,3}[\w.+-]+@[\w.-]+(?::\d+)?\s+"
    r"(?!(?:to|and|or|then|for|from|with|on|in|at|if|when|via|as|is|was|the|a|an)\b)[^\s-]",
    re.IGNORECASE,
)
# Credentials in a connection string of any scheme ("postgres://admin:hunter2@db",
# "redis://:pass@cache", "mongodb+srv://u:p@host") or of none ("admin:hunter2@10.0.0.5").
# QA: only http and ftp links were read for them. Without a scheme the user starts with a
# letter ("10:30@office" is a time). A start is where no such run precedes it, so a long
# run is read once.
USERINFO = re.compile(
    r"(?<![\w.+:/@-])(?:[a-z][\w+.-]*://[^\s/:@]*|[a-z_][\w.+-]*):[^\s/@]+@[\w\[]",
    re.IGNORECASE,
)
# A command line that passes a secret (QA: each was kept): "curl -u admin:hunter2" (a
# "1000:1000" is a user and a group), "sshpass -p hunter2", "redis-cli -a hunter2", and a
# database client's "-phunter2", "-p hunter2" or "--password=…", where a number is a port
# and a word that joins the clause is none (a bare "-p" asks for the password).
JOINS = r"(?:to|and|or|then|for|from|with|on|in|at|as|the|a|an)"  # "mysql -u root -p to connect"
DB_CLIENT = r"(?:mysql\w*|mariadb\w*|psql|pg_\w+|mongo\w*|sqlcmd|isql|clickhouse-client)"
COMMAND_SECRET = re.compile(
    r"(?<!\S)(?:-u|--user)[\s=]+(?!\d+:\d+\b)[^\s:]*:\S|\bsshpass\s+-p\s*\S|"
    r"\bredis-cli\b[^\n;|&]{0,80}?\s-a\s+\S|"
    rf"\b{DB_CLIENT}\b[^\n;|&]{{0,80}}?\s(?:-p|--pass\w*)(?:\s+|=)?(?!\d+\b|{JOINS}\b)[^\s-]",
    re.IGNORECASE,
)
# A credential sent as a header (QA: "Authorization: Bearer abc.def.ghi" was kept): the
# header with its scheme, or "Bearer" or "Basic" before a word that reads as a token (a
# digit, a dot, base64's symbols, a capital inside it, a placeholder); "Bearer bonds" and
# "Basic English" are English.
AUTH_HEADER = re.compile(
    r"\b(?:proxy-)?authorization\s*[:=]\s*(?:bearer|basic|digest|token|bot|negotiate|ntlm)\b",
    re.IGNORECASE,
)
AUTH_SCHEME = re.compile(r"\b(?:bearer|basic|authorization\s*[:=])\s+(?P<token>\S+)", re.IGNORECASE)
TOKEN_MARK = re.compile(r"[\d.~+/=_]|(?<=[a-z])[A-Z]")


def token_given(text: str) -> bool:
    return any(_token_like(m.group("token").rstrip(TRAILING)) for m in AUTH_SCHEME.finditer(text))


def _token_like(word: str) -> bool:
    if word.startswith("<") and word.endswith(">"):  # "Bearer <token>"
        return True
    return len(word) >= 8 and TOKEN_MARK.search(word, 1) is not None


def login_given(text: str) -> bool:
    """A login and its secret side by side (``CREDENTIAL_PAIR``, ``SLASH_PAIR``)."""
    pairs = list(CREDENTIAL_PAIR.finditer(text))
    slashes = list(SLASH_PAIR.finditer(text))
    if not pairs and not slashes:
        return False
    login = ACCOUNT.search(text) is not None  # once a text, not once a pair
    return any(_email_login(text, pair, login) for pair in pairs) or any(
        _slash_login(pair, login) for pair in slashes
    )


def _email_login(text: str, pair: re.Match[str], login: bool) -> bool:
    secret = pair.group("secret")
    word = secret.rstrip(TRAILING)
    if pair.group("joined"):
        return not EMAIL.fullmatch(word)
    if LOGIN_HOST.fullmatch(pair.group("host")):
        return True
    ends = word != secret or CLAUSE_END.match(text, pair.end()) is not None
    return secret_like(word) and (login or ends)


def _slash_login(pair: re.Match[str], login: bool) -> bool:
    secret = pair.group("secret").rstrip(TRAILING)
    if EMAIL.fullmatch(secret) or not (login or USUAL_USER.fullmatch(pair.group("user"))):
        return False
    return bool(pair.group("spaced")) or secret_like(secret)


def secret_like(word: str) -> bool:
    return bool((DIGIT.search(word) and LETTER.search(word)) or SYMBOL.search(word))


# A secret assigned to a name that says it is one, as in a config file or a shell:
# "DB_PASSWORD=hunter2", "dbPassword: hunter2", "export GITHUB_TOKEN=…", "ADMIN_PASSWORD is
# hunter2" (QA: each was kept; "\b" finds no edge after "_"). The name is found first (a
# start where no name goes on), then looked into, so a long word is read once.
ASSIGNED = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][\w.-]{0,63})(?:\s*[:=]\s*|\s+is\s+)[\"']?[^\s\"']{3,}"
)
SECRET_NAME = re.compile(
    r"pass(?:word|wd)?|pwd|secret|token(?!s)|api_?key|access_?key|private_?key|psk",
    re.IGNORECASE,  # "MAX_TOKENS" counts them
)
CAMEL = re.compile(r"[a-z][A-Z]")


def assigned_secret(text: str) -> bool:
    """A name of a config's or a shell's kind (an underscore, camelCase or capitals) that
    names a secret, given a value."""
    for found in ASSIGNED.finditer(text):
        name = found.group("name")
        written = "_" in name or CAMEL.search(name) is not None or name.isupper()
        if written and SECRET_NAME.search(name):
            return True
    return False
