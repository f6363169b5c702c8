"""/cron on the platforms: a Telegram update in a forum topic (``/cron@bot add …``, through the
verified webhook and ``gateway.inbound.receive``, a real worker and the fake Bot API) adds a job
whose run, a fresh session, is delivered into that topic; each platform hands ``/cron`` on as a
command (Slack's ``@app cron …`` and ``/hbgw cron …``, Discord's ``/cron text:…``)."""

from __future__ import annotations

from support.fake_telegram import USERNAME
from support.harness import wait_until
from support.telegram_fixtures import GROUP, OWNER, TOPIC, Telegram, message_update

from hbgw.gateway.platforms.discord.commands import definitions
from hbgw.gateway.platforms.discord.interactions import Interaction
from hbgw.gateway.platforms.slack.events import as_command
from hbgw.gateway.platforms.telegram.updates import as_text, read_command


def test_a_job_added_in_a_telegram_topic_runs_and_posts_into_the_topic(telegram: Telegram) -> None:
    fake, gw = telegram.fake, telegram.gw
    with gw.worker("w1"):
        rt = gw.rt
        wait_until(lambda: rt.registry.live(rt.now_ms()) == ["w1"], 30, "w1 live")
        # The API's clock runs 61 s behind the workers': "in 1m" is due for them at once.
        said = message_update(1, f"/cron@{USERNAME} add in 1m -- remind me to deploy")
        assert telegram.update(said).status_code == 200
        [notice] = wait_until(lambda: fake.sends(message_thread_id=TOPIC), 30, "the answer")
        assert notice.params["text"].startswith("⏰ Cron job j")
        jid = notice.params["text"].split()[3]
        job = gw.store.jobs.job(jid)
        assert job.owner == OWNER and job.route.thread == str(TOPIC)
        before = len(fake.calls)

        def ran() -> object:
            gw.tick()
            runs = gw.store.jobs.job_runs(jid)
            return runs if runs and runs[0].state == "completed" else None

        [run] = wait_until(ran, 30, "the job's run")
        # The run had a session of its own, which the topic's next message does not find.
        assert run.session_id != telegram.session()
        during = fake.calls[before:]
        assert [c.method for c in during] == ["sendMessage"]  # quiet: no typing
        posted = during[0].params
        assert (posted["chat_id"], posted["message_thread_id"]) == (str(GROUP), TOPIC)
        assert f"Cron job {jid}" in posted["text"]
        listed = message_update(2, "/cron list")
        assert telegram.update(listed).status_code == 200
        [answer] = wait_until(
            lambda: [c for c in fake.sends(message_thread_id=TOPIC) if "Cron jobs of" in
                     c.params["text"]],
            30,
            "the list",
        )  # fmt: skip
        assert jid in answer.params["text"] and "completed" in answer.params["text"]


def test_every_platform_hands_cron_on_as_a_command() -> None:
    assert as_command("cron list", addressed=True) == "/cron list"
    assert as_command("cron list", addressed=False) == "cron list"
    command = read_command("/cron@hbgw_ops_bot add in 10m -- x")
    assert as_text(command, "/cron@hbgw_ops_bot add in 10m -- x") == "/cron add in 10m -- x"
    assert "cron" in [d["name"] for d in definitions()]
    used = Interaction("1", "t", "a", "g", "c", None, "cron", "add in 10m -- x")
    assert used.is_command and used.command_line() == "/cron add in 10m -- x"
