"""The pure core: evidence, selection, replay-safe proposals, backoff; and the turn contract."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from contracts.commands import RememberMemory
from contracts.conversations import ConversationTurn
from services.extractor.access import gives_access
from services.extractor.core import (
    MAX_CANDIDATES,
    Candidate,
    TurnKey,
    author,
    backoff_delay,
    command_id,
    evidence_ok,
    proposals,
    select,
)
from services.extractor.rules import rule_candidates

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
MESSAGE = "Honestly, I prefer short answers. My timezone is CET."
ANA = author("ana")


def key(stream: str, turn_id: str = "turn-1", who: str = ANA) -> TurnKey:
    return TurnKey(stream.split("/", 1)[0], turn_id, stream, who)


def turn(**changes: object) -> ConversationTurn:
    fields: dict[str, object] = {
        "turn_id": "turn-1",
        "run_id": "run-1",
        "token": "tok",
        "user_message": MESSAGE,
        "sources": ("msg-1", "msg-2"),
        "completed_at": NOW,
    }
    return ConversationTurn.model_validate(fields | changes)


def test_evidence_must_appear_in_the_message() -> None:
    assert evidence_ok("I prefer short answers", MESSAGE)
    assert evidence_ok("  i PREFER   “short” answers. ", 'I prefer "short" answers.')
    assert not evidence_ok("I prefer long answers", MESSAGE)
    assert not evidence_ok("prefer", MESSAGE)  # one word proves nothing
    assert not evidence_ok("", MESSAGE)


def test_select_drops_ungrounded_secret_empty_and_duplicate_candidates() -> None:
    kept = select(
        [
            Candidate("Prefers short answers.", "preference", "I prefer short answers"),
            Candidate("Prefers short answers.", "preference", "My timezone is CET"),
            Candidate("Lives in Paris.", "fact", "I live in Paris"),
            Candidate("Password is hunter2.", "fact", "I prefer short answers"),
            Candidate("", "fact", "My timezone is CET"),
            Candidate("Timezone is CET.", "fact", "My timezone is CET"),
        ],
        MESSAGE,
    )
    assert [c.content for c in kept] == ["Prefers short answers.", "Timezone is CET."]


@given(st.lists(st.sampled_from(MESSAGE.split(".")[:2]), max_size=12), st.integers(0, 50))
def test_select_never_returns_more_than_five_grounded_candidates(
    quotes: list[str], salt: int
) -> None:
    candidates = [Candidate(f"Item {salt + i}.", "fact", q) for i, q in enumerate(quotes)]
    kept = select(candidates, MESSAGE)
    assert len(kept) <= MAX_CANDIDATES
    assert all(evidence_ok(c.evidence, MESSAGE) for c in kept)


def test_proposals_are_candidates_acting_with_the_turns_token() -> None:
    candidates = [Candidate("I prefer short answers.", "preference", "I prefer short answers")]
    [envelope] = proposals(turn(), key("acme/member:ana"), "rules", candidates, NOW)

    assert envelope.type == "RememberMemory"
    assert envelope.token == "tok"
    assert envelope.stream_id == "acme/member:ana"
    assert envelope.issued_at == NOW
    command = RememberMemory.model_validate(envelope.payload)
    assert command.candidate is True
    assert command.extracted is True  # the change log says the extractor made it
    assert command.scope == "private"
    assert command.kind == "preference"
    assert command.content == "I prefer short answers."
    assert command.sources == ("turn-1", "msg-1", "msg-2")
    assert command.user_message == MESSAGE
    assert command.tags == ("extracted", "rules")


def test_a_replayed_turn_gets_the_same_command_ids() -> None:
    candidates = [
        Candidate("I prefer short answers.", "preference", "I prefer short answers"),
        Candidate("My timezone is CET.", "fact", "My timezone is CET"),
    ]
    first = [e.command_id for e in proposals(turn(), key("acme/shared"), "rules", candidates, NOW)]
    again = [e.command_id for e in proposals(turn(), key("acme/shared"), "rules", candidates, NOW)]
    assert first == again
    assert len(set(first)) == 2


def test_command_ids_differ_by_stream_turn_and_family_but_not_fallback() -> None:
    base = command_id("acme/shared", ANA, "turn-1", "rules", 0)
    assert base == command_id("acme/shared", ANA, "turn-1", "rules-fallback", 0)
    assert base != command_id("acme/shared", ANA, "turn-1", "ai", 0)
    assert base != command_id("other/shared", ANA, "turn-1", "rules", 0)
    assert base != command_id("acme/shared", ANA, "turn-2", "rules", 0)
    assert base != command_id("acme/shared", ANA, "turn-1", "rules", 1)


def test_the_same_turn_id_from_another_author_is_another_turn() -> None:
    """A turn id is its caller's: Bob's "turn-1" in the shared stream is not Ana's, so
    the writer must not answer his proposals with her first reply."""
    candidates = [Candidate("We decided to ship on Tuesdays.", "decision", "We decided to ship")]
    message = turn(user_message="We decided to ship on Tuesdays.")
    authors = [
        author("ana"),
        author("bob"),
        author("ana", agent="helper"),
        author("ana", session="s-1"),
        author("ana", agent="helper", session="s-1"),
    ]
    ids = {
        proposals(message, key("acme/shared", who=who), "rules", candidates, NOW)[0].command_id
        for who in authors
    }
    assert len(ids) == len(authors)
    assert len(set(authors)) == len(authors)
    assert author("ana", None, None) == author("ana")  # one canonical form per author


def test_the_turn_id_is_not_repeated_in_sources() -> None:
    envelope = proposals(
        turn(sources=("turn-1", "msg-1")),
        key("acme/shared"),
        "ai",
        [Candidate("I prefer short answers.", "preference", "I prefer short answers")],
        NOW,
    )[0]
    assert envelope.payload["sources"] == ["turn-1", "msg-1"]
    assert envelope.payload["tags"] == ["extracted", "ai"]


def test_backoff_doubles_with_jitter_and_respects_retry_after_and_cap() -> None:
    assert [backoff_delay(r, 0.5, 30, None, 1.0) for r in range(5)] == [0.5, 1, 2, 4, 8]
    assert backoff_delay(2, 0.5, 30, None, 0.0) == 1.0
    assert backoff_delay(0, 0.5, 30, 3.0, 1.0) == 3.0
    assert backoff_delay(10, 0.5, 30, None, 1.0) == 30
    assert backoff_delay(0, 0.5, 30, 120.0, 1.0) == 30


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I prefer tea.", False),
        ("Docs at https://docs.example.com/guide", False),
        ("Always pin release notes.", False),
        ("My password is x", True),
        ("the secret key lives in vault", True),
        ("bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc", True),
        ("AKIAABCDEFGHIJKLMNOP", True),
        ("value 3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c1e", True),
        ("https://user:pw@host.example.com", True),
        ("https://example.com/reset/abc", True),
        ("https://example.com/page?token=1", True),
        ("My PIN is 1234", True),
        ("a" * 30 + " and 123", False),  # a long word, and digits elsewhere
        ("x" * 23 + "1", True),  # 24 characters mixing both
        ("x" * 22 + "1", False),
        # QA: a Meet link's host was never read, so every Meet link was kept.
        ("https://meet.google.com/abc-defg-hij", True),
        ("meet.google.com/abc-defg-hij", True),
        ("https://meet.google.com", False),  # the service, not a meeting
        ("www.zoom.us/j/123456789", True),
        ("https://teams.live.com/meet/9381234", True),
        ("https://join.slack.com/t/acme/shared_invite/zt-1", True),
        ("https://t.me/+AbCdEf", True),
        ("https://zoom.us/pricing", False),
        ("deploy@10.0.0.5 using hunter2", True),
        ("deploy@10.0.0.5:22", False),  # a port, no secret
        ("ana@example.com with sunshine99", True),  # a word that reads as a secret
        ("write to ana@example.com with questions", False),  # an address, and a word
        ("the login account is ana@example.com with sunshine99", True),
        ("The vault combination is 4 8 15", True),
        ("The combination of tea and cake is 100 percent good", False),
        ("opens with 2 tabs", False),
        ("opens at 9:00", False),
        ("Your secret question answer is Rex", True),
        ("the maiden voyage is in May", False),
        # QA: these were kept. An openable thing "is" a code, a combo, a code to get in.
        ("The padlock is 3-3-7", True),
        ("The keypad: 4815", True),
        ("The door is 1234#", True),
        ("The code to open the safe is 909", True),
        ("Unlock the front door with 4815.", True),
        ("Dial 4815 at the gate", True),
        ("The gate opens with 7788 on the keypad", True),
        ("The house is 120 years old", False),  # a count, and no lock
        ("The gate is 300 meters away", False),
        ("Open the gate for 300 guests", False),
        ("The code to open the file is in utils.py", False),
        # A login and its secret: "as X with Y", "/", a shell line.
        ("sign in as ana with Sunshine1", True),
        ("Log in as admin with the SSO button.", False),
        ("root / toor", True),
        ("The account is ana / sunshine99.", True),
        ("admin/Sunshine99", True),
        ("tea / coffee", False),
        ("read/write", False),
        ("The server handles 100 req/s.", False),
        ("ssh -p 22 admin@nas hunter2", True),
        ("ssh admin@nas to restart it", False),
        ("deploy@10.0.0.5 uses hunter2", True),
        ("The account ana@example.com uses Gmail.", False),
        ("Contact ana@example.com / bob@example.com", False),
        # A first thing is a fact until it is framed as an answer.
        ("My first kiss was in Paris.", False),
        ("My first car was memorable.", False),
        ("My first daughter's name is Lily.", False),
        ("My first car? The answer is Volvo.", True),
        ("The answer to the first pet question is Rex", True),
    ],
)
def test_text_that_gives_access(text: str, expected: bool) -> None:
    assert gives_access(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        # QA: each of these was kept. A pin in lowercase, given a number.
        "my pin is 1234",
        "pin: 1234",
        "PIN 1234",
        "the pin for my card is 1234",
        # Credentials in a connection string of any scheme, or of none.
        "postgres://admin:hunter2@db:5432/app",
        "psql postgresql://admin:hunter2@db.example.com/prod",
        "mysql://root:hunter2@localhost/app",
        "redis://:hunter2@cache:6379",
        "mongodb+srv://ana:hunter2@cluster0.example.net",
        "amqp://guest:hunter2@rabbit:5672/",
        "The NAS is admin:hunter2@192.168.1.10",
        # A command line that passes a secret.
        "curl -u admin:hunter2 https://api.example.com",
        "mysql -u root -phunter2",
        "mysqldump --password=hunter2 app",
        "psql -h db -U admin -p hunter2",
        "sshpass -p hunter2 ssh root@nas",
        "redis-cli -h cache -a hunter2",
        # A header's credential.
        "Authorization: Bearer abc.def.ghi",
        "Send Bearer <token> with each call",
        "Basic dXNlcjpodW50ZXIy",
        # The word misspelt or disguised.
        "My passwd is hunter2",
        "my pswd is hunter2",
        "my pword is hunter2",
        "My p@ssword is hunter2",
        "My pa55word is hunter2",
        "my passw0rd is hunter2",
        # A wifi given without the word "password".
        "The wifi is Sunshine2024!",
        "Our wifi network HomeNet uses sunshine99",
        "HomeNet uses sunshine99 on the office network",
        "Guest network: CafeGuest, sunshine99",
        # What a lock takes, said another way.
        "the laptop unlocks with hunter2",
        "The garage opener is 7788",
        "Door 4815",
        "Alarm 5566",
        "The code: 4815 opens the shed",
        "code : 4815",
        "the keypad takes 4815",
        # A key to something, a pre-shared key.
        "the key to the server is hunter2",
        "The VPN PSK is abc123",
        "the pre-shared key is abc123",
        # One-time, backup, recovery, confirmation and verification codes.
        "backup codes: 1234-5678, 2345-6789",
        "Confirmation code 482913",
        "the OTP is 123456",
        "the verification code was 482913",
        # Bank details.
        "Account number 12345678, sort code 12-34-56",
        "My IBAN is DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "The routing number is 021000021",
        # A wallet's seed words, an invitation's link, a spaced SSN.
        "my seed words are apple banana cherry",
        "https://app.example.com/invitations/abc",
        "https://github.com/acme/app/invitations",
        "My social security number is 123 45 6789",
        # The password in other languages.
        "Mein Kennwort ist sonne123",
        "La clave es sol123",
        "Parol: qwerty",
        "Le mot de passe est soleil",
        "Mi contrase\u00f1a es sol",
        "A senha \u00e9 sol",
        "Het wachtwoord is zon",
        "Has\u0142o: s\u0142o\u0144ce",
        # A plural given a value is no talk of them in general.
        "Passwords are hunter2 and moonlight",
        "The API keys are in the vault",
    ],
)
def test_secrets_said_in_other_shapes_give_access(text: str) -> None:
    """Seed 002: never keep passwords, keys or links that give access (QA: each was kept)."""
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        # QA: these were dropped, and give no one access.
        "My childhood home was in Porto.",
        "My locker combination changed last week.",
        "I use a password manager.",
        "We rotate API keys every 90 days.",
        "Session tokens expire after 1 hour.",
        "The access code policy requires 6 digits.",
        "The promo code: SPRING",
        # Near misses of this round's shapes.
        "The pin on the map is Lisbon",
        "Our sort order is by date",
        "The wifi is fast",
        "The wifi network uses WPA2-Personal at 5GHz.",
        "Email ops1@acme.com about the network.",
        "The office door is blue",
        "Bearer bonds are old",
        "Basic English is required.",
        "We board at gate 104.",
        "Go to door 12.",
        "My phone unlocks with Face ID.",
        "The laptop unlocks with a fingerprint.",
        "docker run -u 1000:1000 app",
        "psql -h db -p 5432 app",
        "Run mysql -u root -p to connect.",
        "Connect to postgres://db:5432/app for reads.",
        "Redis runs at redis://cache:6379.",
        "The meeting is at 10:30@office",
        "The key to success is patience.",
        "My childhood best bakery was in Porto.",
    ],
)
def test_facts_that_only_sound_like_secrets_give_no_access(text: str) -> None:
    assert not gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        "The server is reachable as root@10.0.0.5 using hunter2.",
        "The Netflix account is ana@example.com with sunshine99.",
        "The safe combination is 12-34-56.",
        "The gate opens with 7788.",
        "The garage opens with 4-8-1-5.",
        "The meeting link is https://meet.google.com/abc-defg-hij.",
        "My mother\u2019s maiden name is Smith.",
        # QA: each of these was proposed too.
        "The gate is 4815.",
        "The padlock is 3-3-7.",
        "My bike lock is 4471.",
        "Our apartment buzzer is 4815.",
        "The safe combo is 12 34 56.",
        "Log in as admin with sunshine.",
        "The code to get in is 4815.",
        "The account ana@example.com uses sunshine99.",
        "Disarm the alarm: 5566",
        "At the gate, dial 4815",
        "admin / sunshine",
        "ssh admin@nas hunter",
    ],
)
def test_a_models_candidate_that_gives_access_is_dropped(text: str) -> None:
    """QA: each was proposed from a published turn; the model's own say is not trusted."""
    assert select([Candidate(text, "fact", text)], text) == []


@pytest.mark.parametrize(
    "text",
    [
        "The office opens at 9:00.",
        "My budget is 1500 EUR.",
        "The flight is at 10:30.",
        "Ana's email is ana@example.com.",
        # QA: each of these was dropped.
        "Write to ana@example.com with Q3 results.",
        "Contact ana@example.com with your account questions.",
        "Send invoices to billing@acme.com / finance@acme.com.",
        "My first car was a Volvo.",
        "Ana's first boss was very kind.",
        "My first teacher taught me to read.",
        "The user's first school was in Lisbon.",
        "The museum opens with 300 visitors a day.",
    ],
)
def test_a_models_candidate_of_an_ordinary_fact_is_kept(text: str) -> None:
    assert select([Candidate(text, "fact", text)], text) == [Candidate(text, "fact", text)]


def test_a_long_run_of_letters_is_read_in_linear_time() -> None:
    """A security review: the opaque-key check scanned a run from each place in it, so a
    20,000-character turn took 1.4 s; a million characters now take a fraction of that."""
    started = time.process_time()
    assert not gives_access("Remember that " + "x" * 1_000_000)
    assert time.process_time() - started < 1.0


@pytest.mark.parametrize(
    "text",
    [
        "a." * 10_000 + "/",  # a bare host was tried from each of its labels: 5 s
        "x@" + "a." * 10_000 + " with y",
        "ana@" * 5_000,
        "ana@example.com with questions " * 600,
        "The gate opens with " + "1 " * 10_000,
        "to open " * 2_500,
        # Patterns with a quantifier inside a quantifier or a window (QA's new shapes).
        "the gate is " + "1 " * 10_000 + "x",
        "gate " * 4_000 + "dial " + "1 " * 10 + "x",
        "code to open " + "the a " * 3_300,
        "unlock the door with " * 950,
        "admin / " * 2_500,
        "a/" * 10_000,
        "a" * 20_000 + " / b",
        "log in as " + "x " * 10_000,
        "ssh " + "-p 22 " * 3_300,
        "ssh " + "a@" * 10_000,
        "first car " * 2_000 + "answer to",
        "a@b.com / " * 2_000,
        # This round's shapes: connection strings, command lines, headers, networks, plurals.
        "a:" * 10_000,
        "postgres://" + "a:" * 5_000,
        "a://" * 5_000,
        "a:b" + "c" * 20_000,
        "mysql " * 4_000,
        "mysql " + "-p " * 6_000,
        "-u a:" * 4_000,
        "redis-cli " * 2_000,
        "bearer " * 3_000,
        "wifi " + "a1b2c3 " * 3_000,
        "The wifi is. " * 1_500,
        "unlock with " * 1_700,
        "API keys every " * 1_400,
        " tokens" * 3_000,
        "pin 1 " * 3_000,
        "pin for the " * 2_000 + "1 " * 5_000,
        "door " + "1 " * 10_000 + "x",
        "Alarm 1 2 " * 2_000,
        "key to the " * 1_800,
        "AB12 " + "ABCD " * 4_000,
        "locker combination " * 1_000 + "1 " * 5_000,
        "p@" * 10_000,
    ],
)
def test_a_turn_of_long_hosts_logins_or_codes_is_read_quickly(text: str) -> None:
    started = time.process_time()
    gives_access(text)
    assert time.process_time() - started < 0.5


def test_turn_contract_defaults_and_strictness() -> None:
    t = turn()
    assert t.scope == "private"
    assert t.assistant_message is None
    with pytest.raises(ValidationError):
        turn(surprise=True)
    with pytest.raises(ValidationError):
        turn(scope="member:bob")  # a scope is chosen among the token's, never named
    with pytest.raises(ValidationError):
        turn(sources=tuple(f"m{i}" for i in range(32)))
    with pytest.raises(ValidationError):
        turn(sources=("",))


def test_a_turn_of_thousands_of_sentences_is_read_quickly() -> None:
    """QA: 4,000 short sentences with a combining mark held the extractor for 3 s: the
    message was normalised again for each of them. Now once a turn, and at most
    MAX_CONSIDERED candidates are looked at."""
    message = "".join(f"I like pwd {i}\u0301. " for i in range(4000))[:20_000]
    started = time.process_time()
    select(rule_candidates(message), message)
    assert time.process_time() - started < 1.0


def test_a_candidate_must_say_what_its_evidence_says() -> None:
    """QA: a model's "The user's wife has cancer." passed on the evidence "I prefer tea"."""
    message = "I prefer tea in the morning."
    unrelated = Candidate("The user's wife has cancer.", "fact", "I prefer tea in the morning")
    related = Candidate("Prefers tea in the morning.", "preference", "I prefer tea in the morning")
    assert select([unrelated, related], message) == [related]


def test_a_keyed_candidate_keeps_its_key_in_one_persons_scope_only() -> None:
    """Seed 002: one change per key, so a new value of a named fact replaces the old one
    when a person confirms it. In a scope of several members, two members' "my dentist"
    would be one key: there the candidate has none."""
    keyed = [Candidate("My dentist is Dr. Fang.", "fact", "My dentist is Dr. Fang", "my dentist")]
    for scope, stream, expected in (
        ("private", "acme/member:ana", "my dentist"),
        ("session", "acme/session:s1", "my dentist"),
        ("shared", "acme/shared", None),
        ("project", "acme/project:p", None),
    ):
        [envelope] = proposals(
            turn().model_copy(update={"scope": scope}), key(stream), "rules", keyed, NOW
        )
        assert RememberMemory.model_validate(envelope.payload).key == expected, scope


def test_an_agents_memory_is_proposed_only_lasting_experience() -> None:
    """Seed 002: agent memory keeps procedures, preferences and decisions; a fact of one
    task stays in the session's memory (a seed coverage audit)."""
    found = [
        Candidate("The build is red today.", "fact", "The build is red today"),
        Candidate("Always run the linter first.", "procedure", "Always run the linter first"),
        Candidate("Prefers short answers.", "preference", "short answers"),
    ]
    agent_turn = turn().model_copy(update={"scope": "agent"})
    kept = proposals(agent_turn, key("acme/agent:helper"), "rules", found, NOW)
    assert [RememberMemory.model_validate(e.payload).kind for e in kept] == [
        "procedure",
        "preference",
    ]
    assert len({e.command_id for e in kept}) == 2
    assert len(proposals(turn(), key("acme/member:ana"), "rules", found, NOW)) == 3


@pytest.mark.parametrize(
    "text",
    [  # QA: names of a config's or a shell's kind
        "DB_PASSWORD=hunter2",
        "SMTP_PASS=hunter2",
        "db_password: hunter2",
        "ADMIN_PASSWORD is hunter2",
        "dbPassword=hunter2",
        "adminPassword: hunter2",
        "PGPASSWORD=hunter2 psql",
        "MYSQL_PWD=hunter2 mysql",
        "export GITHUB_TOKEN=abcdefghijklmnop",
        "STRIPE_SECRET=abcdefghijklmnop",
        "AWS_SECRET_ACCESS_KEY=abcdefgh",
        "WIFI_PSK=sunshine99",
    ],
)
def test_a_secret_assigned_to_a_name_that_says_so_gives_access(text: str) -> None:
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        "MAX_TOKENS is 4096 in our config.",
        "The password_policy page is in the wiki.",
        "Our API_VERSION=2024-01 is current.",
    ],
)
def test_a_name_that_holds_no_secret_is_a_fact(text: str) -> None:
    assert not gives_access(text)


TWELVE_WORDS = "apple banana cherry dog egg fig grape hat ice jam kite lemon"


@pytest.mark.parametrize(
    "text",
    [
        # A passphrase said in words, not as one token.
        "the wifi passphrase is correct horse battery staple",
        "our vault passphrase: purple monkey dishwasher",
        "the wifi password is banana split forever",
        "The pass phrase is red green blue yellow",
        "the pass-phrase: purple monkey dishwasher",
        "The passcode is tiger lily",
        "Use correct horse battery staple as the passphrase",
        "The router's password reads banana split forever",
        "The wifi phrase is correct horse battery staple",
        # "pass" alone, given a value, after a login's word or before a secret's shape.
        "My pass is banana split forever",
        "the wifi pass is banana split forever",
        "pass: purple monkey dishwasher",
        "user/pass ana and banana",
        "root pass toor",
        "the pass Tr0ub4dor&3 opens it",
        "Forget the bus pass; my pass is hunter two",
    ],
)
def test_a_passphrase_said_in_words_gives_access(text: str) -> None:
    """Seed 002: never keep passwords; a passphrase of plain words is one."""
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        # A file or a folder shared by its link.
        "https://drive.google.com/file/d/1AbCdEf/view?usp=sharing",
        "docs.google.com/document/d/abcdefgh/edit",
        "https://docs.google.com/spreadsheets/d/abcdefgh",
        "https://drive.google.com/drive/folders/abcdefgh",
        "https://www.dropbox.com/s/abc123/file.pdf",
        "dropbox.com/sh/abc123/xyz",
        "https://www.dropbox.com/scl/fi/abc/file.pdf?rlkey=xyz&dl=0",
        "https://1drv.ms/f/s!AbCdEf",
        "https://app.box.com/s/abc123",
        "https://acme.app.box.com/s/abc123",
        "https://acme.sharepoint.com/:w:/g/personal/ana/EAbc",
        "https://we.tl/t-AbCdEf",
        "https://photos.app.goo.gl/AbCdEf",
        "https://calendar.google.com/calendar/ical/ana%40example.com/private-5f2c1e9a8b7d6c4e/basic.ics",
        "https://hooks.slack.com/services/T000/B000/XXXX",
        # A query that signs or authorises, with a path or without.
        "https://example.com/file?token=abc",
        "example.com?token=abc",
        "https://bucket.s3.amazonaws.com/obj?X-Amz-Signature=abc",
        "https://api.example.com/v1?key=abc",
        "https://cdn.example.com/v.mp4?sig=abc&se=2030",
        "https://api.example.com/cb#access_token=abc",
        "the report is at /files/r.pdf?signature=abc",
        # Invitations, and a link said to open to whoever holds it.
        "https://join.slack.com/t/acme/shared_invite/zt-abc",
        "https://www.figma.com/team_invite/redeem/abc",
        "https://www.figma.com/invite/abc",
        "https://www.notion.so/invite/abc",
        "https://miro.com/welcomeonboard/abc",
        "Anyone with the link can edit: https://example.com/board",
        "anyone with the link can view docs.example.com/board",
        "The share link is https://example.com/b/roadmap",
        "The invite link: acme.com/team",
    ],
)
def test_a_link_shared_with_whoever_holds_it_gives_access(text: str) -> None:
    """Seed 002: never keep links that give access; a share link is one."""
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        "otpauth://totp/Acme:ana?secret=JBSWY3DPEHPK3PXP&issuer=Acme",
        "otpauth-migration://offline?data=CjEKCkhlbGxv",
        "2FA secret: JBSWY3DPEHPK3PXP",
        "the TOTP seed is JBSWY3DPEHPK3PXP",
        "authenticator key JBSW Y3DP EHPK 3PXP",
        "Google Authenticator: jbsw y3dp ehpk 3pxp",
        "the MFA seed is JBSWYDPEHPKPXPAB",
        "totp JBSWY3DPEHPK3PXP",
        "the OTP is 482913",
        "MFA code 482913",
        "two-factor code: 482 913",
        "backup codes: 1234-5678 9012-3456",
        "2FA backup codes are 1234 5678 and 9012 3456",
        "Ana's scratch codes: 12345678 87654321",
        "The GitHub recovery codes: a1b2c-3d4e5 f6g7h-8i9j0",
    ],
)
def test_a_second_factors_seed_or_codes_give_access(text: str) -> None:
    """Whoever has the seed of a 2FA app or its backup codes has the second factor."""
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        f"my seed phrase is {TWELVE_WORDS}",
        f"recovery phrase: {TWELVE_WORDS}",
        "the mnemonic is apple banana cherry dog",
        "my secret recovery phrase is apple banana cherry",
        "my seed is apple banana cherry dog",
        f"my seed is {TWELVE_WORDS}",
        f"the wallet words are {TWELVE_WORDS}",
        f"metamask: {TWELVE_WORDS}",
        f"{TWELVE_WORDS} is my bitcoin wallet",
        f"The Ledger backup: {' '.join(f'{n}. {w}' for n, w in enumerate(TWELVE_WORDS.split()))}",
        f"wallet: {', '.join(2 * TWELVE_WORDS.split())}",
        "the BIP39 words are apple banana cherry",
    ],
)
def test_a_wallets_seed_phrase_gives_access(text: str) -> None:
    """Whoever has a wallet's seed phrase has the wallet."""
    assert gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        # Dropped before, and no secret.
        "Ana has a bus pass",
        "the piano key of C major",
        "the fix is in commit 3f9c2ab",
        "commit a1b2c3d4e5f6",
        "The fix landed in commit 3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c1e3f9a1c7e.",
        "Revert sha 3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c1e3f9a1c7e first.",
        "Ana's boarding pass is on her phone.",
        "The tests pass on CI.",
        "Please pass the salt.",
        "The mountain pass is closed in winter.",
        "Bob set up 2FA for everyone.",
        "2FA is required for admins.",
        "OTP codes arrive by SMS.",
        # Dropped by the first version of the rules above (a review).
        "The random seed is fixed because tests need stable ordering.",
        "Ana likes crypto news: bitcoin price alerts, ethereum gas fees, weekly market "
        "recaps, short summaries only please.",
        "Filter with ?author=ana on the board",
        "Sort by ?design=compact in the gallery",
        "Bob restores the backup every Sunday at noon before the team reviews the weekly "
        "plan together",
        # Ordinary facts near these words.
        "Ana changed the wifi router.",
        "The password policy needs 12 characters.",
        "We share the drive folder with the design team.",
        "The seed round closed in May.",
        "Recovery took two weeks.",
        "We enforce MFA on all admin accounts.",
        "Ana uses an authenticator app.",
        "Ana set up two-factor authentication yesterday.",
        "Bob turned on 2-step verification last week.",
        "The TOTP window is 30 seconds.",
        "The random seed is 42.",
        "The wallet is brown leather.",
        "The crypto team meets on Fridays.",
        "The design doc is on Google Drive.",
        "Share the Dropbox folder with Bob.",
        "The recovery plan has three phases.",
        "The backup runs nightly at 2am.",
        "The invite link goes out on Monday.",
        "Anyone with the link can comment on the draft.",
        "Bob bought a season pass for the ski resort.",
        "We moved the passphrase rules into the security wiki.",
        "Our share of the market grew.",
        "Read https://example.com/blog/private-equity first.",
    ],
)
def test_facts_near_passes_seeds_factors_and_shares_give_no_access(text: str) -> None:
    assert not gives_access(text)


@pytest.mark.parametrize(
    "text",
    [
        "The value 3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c1e3f9a1c7e",  # a hash with no commit
        "commit AbC123dEf456GhI789jKl012",  # not a commit's hash
        "the bus pass code is 4815",
    ],
)
def test_near_misses_of_the_exceptions_still_give_access(text: str) -> None:
    assert gives_access(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pass " * 4_000, False),
        ("bus pass is " * 1_700, False),
        ("user " * 3_999 + "pass", True),
        ("2fa " * 5_000, False),
        ("2fa key " * 2_500, False),
        ("totp " + "abcd " * 4_000, False),
        ("otp " + "1 " * 10_000, True),
        ("otpauth:/" * 2_200, False),
        ("wallet " + "apple the " * 2_000, False),
        ("seed is " * 2_500, False),
        ("?" + "a" * 20_000, False),
        ("&a" * 10_000, False),
        ("?a=" * 6_600, False),
        ("anyone with the link " + "a." * 10_000, False),
        ("share link " * 1_800, False),
        ("https://" + "a." * 10_000 + "dropbox.com", False),
        ("https://docs.google.com/" + "a/" * 10_000, False),
        ("https://x.com/" + "invi" * 5_000, False),
        ("commit " + "a1" * 10_000, True),
        ("commit 3f9a1c7e5b2d4f6a8c0e1b3d " * 700, False),
    ],
)
def test_a_long_turn_of_this_rounds_shapes_is_read_through(text: str, expected: bool) -> None:
    """Each pattern is linear in the turn: a 20,000-character turn of its own words
    completes (in milliseconds; a quadratic one would take seconds)."""
    assert gives_access(text[:20_000]) is expected
