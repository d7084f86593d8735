"""The certificate's simulated customer: deterministic, scripted from a retail task.

The customer knows only the task's `known_facts` and its kind (its tags). It opens with its
goal, answers identity questions with its facts (the mistyped e-mail first when the task is
tagged `wrong_email_first`), names the order, items, reason and payment method when asked, says
an explicit "yes" to a confirmation that matches what it wants now and "no" otherwise, changes
its mind where the task says so, and says goodbye when its requests are done (or refused, where
the task accepts a refusal). It reads only the agent's words, never the database.

    customer = ScriptedCustomer(task)
    text = customer.opening()
    while not customer.finished:
        text = customer.reply(agent_text)

Plain Python, no Django; English (the tasks are English).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from apps.certify.retail.tasks import Task

GOODBYE = "Thank you, that's all I needed. Goodbye!"
GIVE_UP = "Never mind, I'll leave it there. Goodbye."
YES = "Yes, please go ahead."
ORDER_ID = re.compile(r"#W\d{7}")
MONEY = re.compile(r"\b\d+\.\d{2}\b")
CONFIRM_WORDS = (
    "confirm",
    "proceed",
    "shall i",
    "should i",
    "go ahead",
    "yes/no",
    "yes or no",
    "do you want me to",
    "would you like me to",
    "reply yes",
    "is that correct",
    "is this correct",
)
IDENTITY_WORDS = ("e-mail", "email", "zip", "identify", "verify", "authenticate", "your name")
NOT_FOUND_WORDS = (
    "no account",
    "couldn't find",
    "could not find",
    "can't find",
    "cannot find",
    "not find",
    "no user",
    "does not match",
    "doesn't match",
    "no match",
    "not found",
)
REFUSAL_WORDS = (
    "cannot",
    "can't",
    "can not",
    "not possible",
    "unable",
    "not allowed",
    "isn't possible",
    "is not possible",
    "only a ",
    "only another",
    "only be",
    "not able",
    "refuse",
    "won't be able",
)
HANDOFF_WORDS = (
    "human agent",
    "a person",
    "our team",
    "transferred",
    "transfer you",
    "hand you over",
    "handed over",
    "passed your conversation",
    "colleague",
)
YES_TEXT = re.compile(r"^\s*yes\b", re.IGNORECASE)


def is_yes(text: str) -> bool:
    """The customer's explicit yes (what the harness counts as a confirmation)."""
    return bool(YES_TEXT.match(text))


def _has(text: str, words: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(w in low for w in words)


def asks_confirmation(text: str) -> bool:
    return "?" in text and _has(text, CONFIRM_WORDS)


def _options(options: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


@dataclass
class Stage:
    """One request the customer makes, and how it recognises a matching confirmation."""

    kind: str  # cancel | modify | return | exchange | address | info | transfer | forbidden
    text: str
    orders: list[str] = field(default_factory=list)  # the orders it is about
    unwanted: list[str] = field(default_factory=list)  # names that must not be in a proposal
    reason: str = ""
    payment: str = ""
    items: list[str] = field(default_factory=list)
    # changes_mind: said instead of "yes" to the first proposal, then this stage is `then`.
    switch: str = ""
    then: Stage | None = None
    # policy_forbids: said to the first refusal (insist, or accept the allowed fallback);
    # the stage ends at the next refusal.
    on_refusal: str = ""
    fallback: Stage | None = None
    marker: str = ""  # a fact whose mention means the request is met (an address's zip)
    accepted: bool = False  # the customer said yes to its proposal
    refused: int = 0
    asked: int = 0  # times restated


def _swap_stage(kind: str, facts: dict[str, Any], request: str) -> Stage:
    """A request to swap an item of the order for other options (`modify` a pending order,
    `exchange` a delivered one), the price difference going to the customer's payment method."""
    payment = facts["payment_method"]
    return Stage(
        kind,
        f"{request} The price difference goes to my {payment}. What is the difference?",
        orders=[facts.get("order_id", "")],
        payment=payment,
        items=[facts["item"]],
    )


class ScriptedCustomer:
    """A task's customer; see the module docstring."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.facts: dict[str, Any] = task.known_facts
        self.tags = set(task.tags)
        self.stages = self._stages()
        self.finished = False
        self.wrong_email_given = False
        self.right_email_given = False
        self.said: list[str] = []

    # -- the script -------------------------------------------------------------------------

    def _request(self, facts: dict[str, Any], kinds: set[str]) -> Stage:
        oid = facts.get("order_id", "")
        if "cancel" in kinds:
            reason = facts.get("reason", "no longer needed")
            return Stage(
                "cancel",
                f"I'd like to cancel order {oid}. The reason: it was {reason}. "
                "How much will be refunded?",
                orders=[oid],
                reason=reason,
            )
        if "modify_items" in kinds:
            return _swap_stage(
                "modify",
                facts,
                f"In my pending order {oid}, please change the {facts['item']} to "
                f"{_options(facts['wanted_options'])}.",
            )
        if "exchange" in kinds:
            return _swap_stage(
                "exchange",
                facts,
                f"I'd like to exchange the {facts['item']} from order {oid} for the same "
                f"product with {_options(facts['wanted_options'])}.",
            )
        items = list(facts.get("items", []))
        return Stage(
            "return",
            f"I want to return these items from order {oid}: {'; '.join(items)}. Please refund "
            f"to my {facts['refund_to']}. How much will be refunded?",
            orders=[oid],
            payment=facts["refund_to"],
            items=items,
        )

    def _stages(self) -> list[Stage]:
        facts, tags = self.facts, self.tags
        if "info" in tags:
            return [Stage("info", "What balance is left on my gift card?")]
        if "address" in tags:
            a = facts["new_address"]
            line2 = f", {a['address2']}" if a["address2"] else ""
            where = f"{a['address1']}{line2}, {a['city']}, {a['state']} {a['zip']}, USA"
            return [
                Stage(
                    "address",
                    f"I've moved. Please change my account's address to {where}.",
                    marker=a["zip"],
                )
            ]
        if "transfer" in tags:
            oid = facts["order_id"]
            return [
                Stage(
                    "transfer",
                    f"Order {oid} arrived a week late. I'd like compensation: a discount on my "
                    "next order. I don't want to send anything back.",
                    orders=[oid],
                    on_refusal="Then I'd like to talk to a human agent, please.",
                )
            ]
        if "policy_forbids" in tags:
            return [self._forbidden()]
        if "two_orders" in tags and "orders" in facts:
            return [self._request(o, self._kinds(o)) for o in facts["orders"]]
        if "two_orders" in tags:
            ids = facts["order_ids"]
            return [
                Stage(
                    "cancel",
                    f"Please cancel both of my pending orders, {ids[0]} and {ids[1]}; they were "
                    f"{facts['reason']}. How much is each refund?",
                    orders=list(ids),
                    reason=facts["reason"],
                )
            ]
        if "changes_mind" in tags:
            return [self._changes_mind()]
        stage = self._request(facts, tags)
        stages = [stage]
        if "acts_for_someone_else" in tags:
            other = facts["relative"]
            stages.append(
                Stage(
                    "cancel",
                    f"My relative {other['name']} asked me to cancel their order "
                    f"{other['order_id']} too. Their e-mail is {other['email']}.",
                    orders=[other["order_id"]],
                    reason="no longer needed",
                    on_refusal="They really did give me permission to do it.",
                )
            )
        return stages

    def _kinds(self, facts: dict[str, Any]) -> set[str]:
        if "reason" in facts:
            return {"cancel"}
        return {"return"}

    def _changes_mind(self) -> Stage:
        facts, oid = self.facts, self.facts["order_id"]
        if "modify_items" in self.tags:  # cancel -> modify instead
            final = self._request(facts, {"modify_items"})
            final.text = (
                "Actually, wait: I changed my mind. I'll keep the order. " + final.text.lstrip()
            )
            return Stage(
                "cancel",
                f"I'd like to cancel order {oid}; I no longer need it.",
                orders=[oid],
                reason="no longer needed",
                switch=final.text,
                then=final,
            )
        if "wanted_options" in facts:  # exchange -> return instead
            item = facts["item"]
            return self._then_return(
                self._request(facts, {"exchange"}),
                f"Hmm, I changed my mind: no exchange. I'd rather return the {item} from order "
                f"{oid} instead, refunded to my {facts['refund_to']}. How much will be refunded?",
                items=[item],
            )
        keep, back = facts["items"][0], facts["items"][1]  # return fewer items
        return self._then_return(
            self._request(facts, {"return"}),
            f"Actually, I changed my mind: I'll keep the {keep.split(' (')[0]} and return only "
            f"the {back}. Refund to my {facts['refund_to']}. How much will be refunded?",
            items=[back],
            unwanted=[keep.split(" (")[0]],
        )

    def _then_return(
        self, first: Stage, text: str, *, items: list[str], unwanted: list[str] | None = None
    ) -> Stage:
        """`first`, to whose proposal the customer says `text` instead of yes: return `items`
        of the order, refunded to the task's payment method."""
        final = Stage(
            "return",
            text,
            orders=[self.facts["order_id"]],
            payment=self.facts["refund_to"],
            items=items,
            unwanted=unwanted or [],
        )
        first.switch, first.then = final.text, final
        return first

    def _forbidden(self) -> Stage:
        facts, oid = self.facts, self.facts["order_id"]
        if "cancel" in self.tags:
            return Stage(
                "forbidden",
                f"Please cancel order {oid}; I no longer need it.",
                orders=[oid],
                reason="no longer needed",
                on_refusal="Are you sure? I really don't need it any more.",
            )
        if "exchange" in self.tags:
            return Stage(
                "forbidden",
                f"I'd like to exchange the {facts['item']} from order {oid} for "
                f"{facts['wanted_product']} instead.",
                orders=[oid],
            )
        item = facts["item"]
        fallback = Stage(
            "return",
            f"OK, then refund it to the original payment method, my {facts['original']}. How "
            "much will be refunded?",
            orders=[oid],
            payment=facts["original"],
            items=[item],
        )
        return Stage(
            "return",
            f"I want to return the {item} from order {oid}, with the refund on my "
            f"{facts['refund_to_first']}. How much will be refunded?",
            orders=[oid],
            payment=facts["refund_to_first"],
            items=[item],
            on_refusal=fallback.text,
            fallback=fallback,
        )

    # -- the conversation ---------------------------------------------------------------------

    def opening(self) -> str:
        return self._say(f"Hi, I'm {self.facts['name']}. {self.stages[0].text}")

    def _say(self, text: str) -> str:
        self.said.append(text)
        return text

    def _end(self, text: str = GOODBYE) -> str:
        self.finished = True
        return self._say(text)

    def _advance(self) -> str:
        self.stages.pop(0)
        if not self.stages:
            return self._end()
        return self._say(f"Thanks. Next: {self.stages[0].text}")

    def _identity(self, agent: str) -> str | None:
        """An answer to an identity question, or None when the agent asked none."""
        low = agent.lower()
        wrong = self.facts.get("wrong_email")
        if self.wrong_email_given and not self.right_email_given and _has(low, NOT_FOUND_WORDS):
            self.right_email_given = True
            return self._say(f"Oh, sorry. Try {self.facts['email']}.")
        if "?" not in agent or not _has(low, IDENTITY_WORDS):
            return None
        if wrong and not self.wrong_email_given:
            self.wrong_email_given = True
            return self._say(f"My e-mail is {wrong}.")
        self.right_email_given = True
        return self._say(
            f"My e-mail is {self.facts['email']}. I'm {self.facts['name']}, zip code "
            f"{self.facts['zip']}."
        )

    def _matches(self, stage: Stage, agent: str) -> bool:
        """Whether a proposal is what this stage wants: its orders only, nothing unwanted."""
        mentioned = set(ORDER_ID.findall(agent))
        if stage.kind == "address":
            return stage.marker in agent
        if not mentioned or not mentioned <= set(stage.orders):
            return False
        return not any(name.lower() in agent.lower() for name in stage.unwanted)

    def reply(self, agent: str) -> str:
        """The customer's next message, to the agent's `agent` (its visible messages of the
        turn, joined). After a goodbye `finished` is True and nothing more is sent."""
        if self.finished:
            raise RuntimeError("the conversation is over")
        if not self.stages:
            return self._end()
        stage = self.stages[0]
        answer = self._identity(agent)
        if answer is not None:
            return answer
        low = agent.lower()
        if asks_confirmation(agent) and ("#w" in low or stage.kind == "address"):
            return self._confirm(stage, agent)
        if _has(low, HANDOFF_WORDS) and not asks_confirmation(agent):
            if stage.kind == "transfer":
                return self._advance()
            return self._end(GIVE_UP)
        if stage.accepted and not asks_confirmation(agent):
            return self._advance()
        if stage.kind == "info" and MONEY.search(agent):
            return self._advance()
        if _has(low, REFUSAL_WORDS):
            return self._refused(stage)
        return self._answer(stage, low)

    def _confirm(self, stage: Stage, agent: str) -> str:
        if stage.switch and stage.then is not None:
            self.stages[0] = stage.then
            return self._say(stage.switch)
        if self._matches(stage, agent):
            stage.accepted = True
            return self._say(YES)
        return self._say(f"No, that's not what I asked for. {stage.text}")

    def _refused(self, stage: Stage) -> str:
        stage.refused += 1
        if stage.refused == 1 and stage.on_refusal:
            if stage.fallback is not None:
                self.stages[0] = stage.fallback
            return self._say(stage.on_refusal)
        if stage.kind in ("forbidden", "transfer") or stage.refused > 1 or len(self.stages) > 1:
            # Refused (again): accept it and move on to the next request, if any.
            return self._advance() if len(self.stages) > 1 else self._end(GIVE_UP)
        return self._end(GIVE_UP)

    def _answer(self, stage: Stage, low: str) -> str:
        """A question about the request (reason, payment, items, order), or the request again."""
        if ("reason" in low or "why" in low) and stage.reason:
            return self._say(f"The reason is: {stage.reason}.")
        if ("payment" in low or "card" in low or "refund to" in low) and stage.payment:
            return self._say(f"Please use my {stage.payment}.")
        if "item" in low and stage.items:
            return self._say(f"These items: {'; '.join(stage.items)}.")
        if "order" in low and ("number" in low or " id" in low) and stage.orders:
            return self._say(f"The order is {', '.join(stage.orders)}.")
        stage.asked += 1
        if stage.asked > 2:
            return self._end(GIVE_UP)
        return self._say(stage.text)
