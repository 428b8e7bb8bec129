//! The frozen evaluation corpus, generated from a seed.
//!
//! A corpus is a set of conversations (one thread per person) in which people state facts about
//! themselves, later correct some of them, ask the assistant to forget others, and sometimes contradict an
//! earlier statement; the assistant occasionally repeats a statement back (which is no second witness).
//! Queries are paraphrases that avoid the statement's wording where they can, so lexical and embedding
//! recall really differ. The answer key says which document must be recalled for each query, with which
//! value, and which values must not appear (superseded or withdrawn ones).
//!
//! Everything is derived from the seed with ChaCha8, so a corpus is identical on every machine.

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Sizes of a generated corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorpusShape {
    /// The seed every choice derives from.
    pub seed: u64,
    /// People, each with one conversation thread.
    pub people: usize,
    /// Facts stated per person (at most the number of topics).
    pub facts_per_person: usize,
    /// Per mille of facts that get a later correction.
    pub corrections_per_mille: u32,
    /// Per mille of facts that are later withdrawn (forgotten).
    pub withdrawals_per_mille: u32,
}

impl Default for CorpusShape {
    fn default() -> Self {
        Self {
            seed: 20_261_130,
            people: 60,
            facts_per_person: 8,
            corrections_per_mille: 200,
            withdrawals_per_mille: 100,
        }
    }
}

/// Who says a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person whose thread it is.
    User,
    /// The assistant.
    Assistant,
}

/// What a turn does to memory, as the answer key knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TurnEffect {
    /// Chit-chat or an assistant echo: no new fact.
    None,
    /// States (or restates, replacing) the value of a topic.
    State {
        /// The topic's id.
        topic: String,
        /// The stated value.
        value: String,
    },
    /// Asks to forget a topic.
    Forget {
        /// The topic's id.
        topic: String,
    },
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who speaks.
    pub role: Role,
    /// The speaker's name (the person for user turns, `assistant` otherwise).
    pub speaker: String,
    /// What is said.
    pub text: String,
    /// Activity time, epoch milliseconds.
    pub at: i64,
    /// Its effect on memory.
    pub effect: TurnEffect,
}

/// One person's conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// The thread id.
    pub thread: String,
    /// The person.
    pub person: String,
    /// The turns in order.
    pub turns: Vec<Turn>,
}

/// A query with its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalQuery {
    /// Query id.
    pub id: String,
    /// The question asked.
    pub text: String,
    /// The person asked about.
    pub person: String,
    /// The topic asked about.
    pub topic: String,
    /// The document id that must be recalled (`person/topic`); `None` when the fact was withdrawn and
    /// nothing may be recalled for it.
    pub expected_document: Option<String>,
    /// The value the recalled document must hold.
    pub expected_value: Option<String>,
    /// Values that must never be returned: superseded or withdrawn ones.
    pub forbidden_values: Vec<String>,
}

/// A whole corpus: conversations, queries and the answer key inside the queries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Corpus {
    /// The shape it was generated from.
    pub shape: CorpusShape,
    /// The conversations.
    pub conversations: Vec<Conversation>,
    /// The queries with their answers.
    pub queries: Vec<EvalQuery>,
}

struct Topic {
    id: &'static str,
    values: &'static [&'static str],
    statements: &'static [&'static str],
    corrections: &'static [&'static str],
    questions: &'static [&'static str],
    forget: &'static str,
}

const TOPICS: &[Topic] = &[
    Topic {
        id: "city",
        values: &[
            "Lisbon",
            "Osaka",
            "Tallinn",
            "Montreal",
            "Nairobi",
            "Valparaiso",
            "Hobart",
            "Ljubljana",
            "Porto",
            "Bergen",
        ],
        statements: &[
            "I live in {v} now.",
            "Home for me is {v} these days.",
            "My flat is in {v}, near the old harbour.",
        ],
        corrections: &[
            "Update: I moved away, I'm settled in {v} now.",
            "Actually I relocated to {v} last month.",
        ],
        questions: &[
            "Which city is {p} based in?",
            "Where does {p} reside?",
            "What town does {p} call home?",
        ],
        forget: "Please forget where I live.",
    },
    Topic {
        id: "editor",
        values: &[
            "Helix",
            "Emacs",
            "Neovim",
            "Zed",
            "Kakoune",
            "Sublime Text",
            "VS Code",
            "Nano",
        ],
        statements: &[
            "I write all my code in {v}.",
            "My editor of choice is {v}.",
            "{v} is what I open every morning to program.",
        ],
        corrections: &[
            "I switched editors, it's {v} for me now.",
            "Correction: these days I code in {v}.",
        ],
        questions: &[
            "Which text editor does {p} prefer?",
            "What tool does {p} use to edit source files?",
        ],
        forget: "Forget which editor I use, please.",
    },
    Topic {
        id: "pet",
        values: &[
            "a grey cat named Miso",
            "a beagle called Pepper",
            "two goldfish",
            "a parrot named Kiwi",
            "a tortoise called Atlas",
            "a rescue greyhound",
        ],
        statements: &[
            "At home I have {v}.",
            "I share my apartment with {v}.",
            "My evenings are spent walking or feeding {v}.",
        ],
        corrections: &[
            "Sad news, things changed: now I have {v}.",
            "We rehomed our old animal; we now keep {v}.",
        ],
        questions: &[
            "What animal lives with {p}?",
            "Does {p} own any companion animals?",
        ],
        forget: "Don't keep anything about my pets.",
    },
    Topic {
        id: "project",
        values: &[
            "the billing migration",
            "a Rust storage engine",
            "the mobile onboarding redesign",
            "a weather forecasting model",
            "the data warehouse cleanup",
            "an open-source compiler",
        ],
        statements: &[
            "My main work right now is {v}.",
            "I'm spending this quarter on {v}.",
            "Most of my hours go into {v}.",
        ],
        corrections: &[
            "I got reassigned; I'm on {v} now.",
            "New priorities: my focus is {v}.",
        ],
        questions: &[
            "What is {p} currently working on?",
            "Which assignment occupies {p} at the moment?",
        ],
        forget: "Forget what I'm working on.",
    },
    Topic {
        id: "drink",
        values: &[
            "oat flat white",
            "green tea",
            "double espresso",
            "rooibos",
            "cold brew",
            "hot chocolate",
        ],
        statements: &[
            "I always order a {v}.",
            "My usual drink is a {v}.",
            "Nothing beats a {v} in the afternoon.",
        ],
        corrections: &[
            "I quit my old habit, now it's {v} for me.",
            "These days I drink {v} instead.",
        ],
        questions: &[
            "What beverage does {p} like?",
            "How does {p} take their caffeine, if at all?",
        ],
        forget: "Please forget my drink order.",
    },
    Topic {
        id: "language",
        values: &[
            "Portuguese",
            "Japanese",
            "Estonian",
            "Swahili",
            "Icelandic",
            "Korean",
            "Greek",
        ],
        statements: &[
            "I'm learning {v} in the evenings.",
            "I take {v} lessons twice a week.",
            "I practise {v} with a tutor.",
        ],
        corrections: &[
            "I gave that up and started {v} instead.",
            "Changed course: I'm studying {v} now.",
        ],
        questions: &[
            "Which foreign tongue is {p} studying?",
            "What language class does {p} attend?",
        ],
        forget: "Forget about my language classes.",
    },
    Topic {
        id: "meeting",
        values: &[
            "Monday mornings",
            "Tuesday afternoons",
            "Wednesday at noon",
            "Thursday evenings",
            "Friday mornings",
        ],
        statements: &[
            "My team sync is on {v}.",
            "We hold our standup {v}.",
            "Our weekly planning happens {v}.",
        ],
        corrections: &[
            "The team sync moved to {v}.",
            "Schedule change: standup is {v} from now on.",
        ],
        questions: &[
            "When does {p}'s team get together?",
            "At what time is {p}'s recurring group call?",
        ],
        forget: "Forget my meeting schedule.",
    },
    Topic {
        id: "allergy",
        values: &[
            "peanuts",
            "shellfish",
            "pollen",
            "penicillin",
            "cats",
            "gluten",
        ],
        statements: &[
            "I'm allergic to {v}.",
            "{v} give me a bad reaction.",
            "I have to avoid {v} for health reasons.",
        ],
        corrections: &[
            "My doctor retested me: it's {v} I react to.",
            "Correction on my allergy: it is {v}.",
        ],
        questions: &[
            "What must {p} stay away from medically?",
            "Which allergen troubles {p}?",
        ],
        forget: "Please forget my health details.",
    },
    Topic {
        id: "hobby",
        values: &[
            "bouldering",
            "sourdough baking",
            "birdwatching",
            "chess",
            "woodworking",
            "trail running",
            "pottery",
        ],
        statements: &[
            "On weekends I go {v}.",
            "My favourite pastime is {v}.",
            "I spend Saturdays on {v}.",
        ],
        corrections: &[
            "I picked up a new pastime: {v}.",
            "Lately my weekends are all about {v}.",
        ],
        questions: &[
            "What does {p} do for fun?",
            "How does {p} spend free time on weekends?",
        ],
        forget: "Forget my hobbies.",
    },
    Topic {
        id: "birthday",
        values: &["January", "March", "May", "July", "September", "November"],
        statements: &[
            "My birthday is in {v}.",
            "I was born in {v}.",
            "I celebrate another year every {v}.",
        ],
        corrections: &[
            "Sorry, I misspoke earlier: my birthday is in {v}.",
            "Correction: I was actually born in {v}.",
        ],
        questions: &[
            "In which month does {p} celebrate turning a year older?",
            "When is {p}'s birthday?",
        ],
        forget: "Forget my birthday.",
    },
];

const FIRST_NAMES: &[&str] = &[
    "Ada", "Bruno", "Chiara", "Dmitri", "Esther", "Farid", "Greta", "Hiro", "Ines", "Jonas",
    "Keiko", "Lars", "Maya", "Nikolai", "Olu", "Priya", "Quentin", "Rosa", "Sven", "Tamar", "Umar",
    "Vera", "Wen", "Ximena", "Yusuf", "Zofia",
];
const LAST_NAMES: &[&str] = &[
    "Almeida", "Brandt", "Castro", "Dubois", "Eriksen", "Fujita", "Garcia", "Haddad", "Ivanova",
    "Jensen", "Kowalski", "Laine", "Moreau", "Nakamura", "Okafor", "Petrov", "Quinn", "Rossi",
    "Santos", "Tanaka",
];
const SMALL_TALK: &[&str] = &[
    "Can you help me plan my week?",
    "Thanks, that was useful.",
    "Let's continue tomorrow.",
    "What's a good way to structure a report?",
    "Remind me to stretch later.",
];

/// Minutes between turns, in milliseconds.
const TURN_GAP_MS: i64 = 90_000;
/// The corpus's first activity time (2026-01-01T00:00:00Z).
const EPOCH_START_MS: i64 = 1_767_225_600_000;

fn fill(template: &str, value: &str, person: &str) -> String {
    template.replace("{v}", value).replace("{p}", person)
}

fn person_name(index: usize) -> String {
    let first = FIRST_NAMES[index % FIRST_NAMES.len()];
    let last = LAST_NAMES[(index / FIRST_NAMES.len() + index * 7) % LAST_NAMES.len()];
    format!("{first} {last}")
}

/// Generates the corpus for a shape. Equal shapes give equal corpora.
pub fn generate(shape: CorpusShape) -> Corpus {
    let mut rng = ChaCha8Rng::seed_from_u64(shape.seed);
    let facts_per_person = shape.facts_per_person.min(TOPICS.len());
    let mut conversations = Vec::with_capacity(shape.people);
    let mut queries = Vec::new();
    for person_index in 0..shape.people {
        let person = person_name(person_index);
        let thread = format!("thread-{person_index:05}");
        let mut clock = EPOCH_START_MS + (person_index as i64) * 86_400_000;
        let mut turns = Vec::new();
        let mut push =
            |turns: &mut Vec<Turn>, role: Role, speaker: &str, text: String, effect: TurnEffect| {
                clock += TURN_GAP_MS;
                turns.push(Turn {
                    role,
                    speaker: speaker.to_owned(),
                    text,
                    at: clock,
                    effect,
                });
            };
        let mut topic_indices: Vec<usize> = (0..TOPICS.len()).collect();
        // Fisher-Yates with the corpus RNG: which topics this person talks about.
        for index in (1..topic_indices.len()).rev() {
            let other = rng.random_range(0..=index);
            topic_indices.swap(index, other);
        }
        topic_indices.truncate(facts_per_person);

        struct Fact {
            topic: usize,
            values: Vec<String>,
            withdrawn: bool,
        }
        let mut facts: Vec<Fact> = Vec::new();
        for &topic_index in &topic_indices {
            let topic = &TOPICS[topic_index];
            let value = (*topic.values.choose(&mut rng).unwrap_or(&topic.values[0])).to_owned();
            let template = topic
                .statements
                .choose(&mut rng)
                .unwrap_or(&topic.statements[0]);
            push(
                &mut turns,
                Role::User,
                &person,
                fill(template, &value, &person),
                TurnEffect::State {
                    topic: topic.id.to_owned(),
                    value: value.clone(),
                },
            );
            if rng.random_ratio(1, 4) {
                // The assistant repeats the statement: not a second witness.
                push(
                    &mut turns,
                    Role::Assistant,
                    "assistant",
                    format!("Noted: {}", fill(template, &value, "you")),
                    TurnEffect::None,
                );
            }
            if rng.random_ratio(1, 3) {
                let talk = SMALL_TALK.choose(&mut rng).unwrap_or(&SMALL_TALK[0]);
                push(
                    &mut turns,
                    Role::User,
                    &person,
                    (*talk).to_owned(),
                    TurnEffect::None,
                );
            }
            facts.push(Fact {
                topic: topic_index,
                values: vec![value],
                withdrawn: false,
            });
        }
        // Later in the conversation: corrections, contradictions and withdrawals.
        for fact in &mut facts {
            let topic = &TOPICS[fact.topic];
            if rng.random_ratio(shape.corrections_per_mille.min(1000), 1000) {
                let candidates: Vec<&&str> = topic
                    .values
                    .iter()
                    .filter(|value| !fact.values.iter().any(|v| v == **value))
                    .collect();
                if let Some(new_value) = candidates.choose(&mut rng) {
                    let new_value = (**new_value).to_owned();
                    // One in three corrections is a bare contradiction (a plain restatement with a new value).
                    let template = if rng.random_ratio(1, 3) {
                        topic
                            .statements
                            .choose(&mut rng)
                            .unwrap_or(&topic.statements[0])
                    } else {
                        topic
                            .corrections
                            .choose(&mut rng)
                            .unwrap_or(&topic.corrections[0])
                    };
                    push(
                        &mut turns,
                        Role::User,
                        &person,
                        fill(template, &new_value, &person),
                        TurnEffect::State {
                            topic: topic.id.to_owned(),
                            value: new_value.clone(),
                        },
                    );
                    fact.values.push(new_value);
                }
            } else if rng.random_ratio(shape.withdrawals_per_mille.min(1000), 1000) {
                push(
                    &mut turns,
                    Role::User,
                    &person,
                    topic.forget.to_owned(),
                    TurnEffect::Forget {
                        topic: topic.id.to_owned(),
                    },
                );
                fact.withdrawn = true;
            }
        }
        push(
            &mut turns,
            Role::Assistant,
            "assistant",
            "Glad to help, talk soon.".to_owned(),
            TurnEffect::None,
        );
        for fact in &facts {
            let topic = &TOPICS[fact.topic];
            let question = topic
                .questions
                .choose(&mut rng)
                .unwrap_or(&topic.questions[0]);
            let (current, older) = fact
                .values
                .split_last()
                .unwrap_or_else(|| unreachable!("a fact has a value"));
            let (expected_document, expected_value, mut forbidden_values) = if fact.withdrawn {
                (None, None, fact.values.clone())
            } else {
                (
                    Some(format!("{person}/{}", topic.id)),
                    Some(current.clone()),
                    older.to_vec(),
                )
            };
            forbidden_values.retain(|value| Some(value) != expected_value.as_ref());
            queries.push(EvalQuery {
                id: format!("q{:06}", queries.len()),
                text: fill(question, "", &person),
                person: person.clone(),
                topic: topic.id.to_owned(),
                expected_document,
                expected_value,
                forbidden_values,
            });
        }
        conversations.push(Conversation {
            thread,
            person,
            turns,
        });
    }
    Corpus {
        shape,
        conversations,
        queries,
    }
}

/// The document id the answer key uses for a person's topic.
pub fn document_id(person: &str, topic: &str) -> String {
    format!("{person}/{topic}")
}

/// What a user sentence of the corpus says, as the eval extractor reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recognised {
    /// The sentence states (or restates, replacing) a topic's value.
    State {
        /// The topic's id.
        topic: &'static str,
        /// The stated value.
        value: &'static str,
        /// Whether the sentence was worded as a correction.
        correction: bool,
    },
    /// The sentence asks to forget a topic.
    Forget {
        /// The topic's id.
        topic: &'static str,
    },
}

/// Reads a user sentence of the corpus: which topic it states or forgets, if any.
///
/// This stands in for a model-backed extractor. It knows the corpus's sentence forms, so extraction is
/// exact and the harness measures recall rather than extraction quality. Small talk and anything else
/// answer `None`.
pub fn recognise(text: &str) -> Option<Recognised> {
    for topic in TOPICS {
        if text == topic.forget {
            return Some(Recognised::Forget { topic: topic.id });
        }
        for &value in topic.values {
            if !text.contains(value) {
                continue;
            }
            let matches = |templates: &[&str]| {
                templates
                    .iter()
                    .any(|template| fill(template, value, "") == text)
            };
            if matches(topic.statements) {
                return Some(Recognised::State {
                    topic: topic.id,
                    value,
                    correction: false,
                });
            }
            if matches(topic.corrections) {
                return Some(Recognised::State {
                    topic: topic.id,
                    value,
                    correction: true,
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_corpus_other_seed_other_corpus() {
        let shape = CorpusShape {
            people: 12,
            ..CorpusShape::default()
        };
        assert_eq!(generate(shape), generate(shape));
        let other = generate(CorpusShape { seed: 7, ..shape });
        assert_ne!(generate(shape).conversations, other.conversations);
    }

    #[test]
    fn answer_key_matches_the_conversations() {
        let corpus = generate(CorpusShape::default());
        for query in &corpus.queries {
            let conversation = corpus
                .conversations
                .iter()
                .find(|conversation| conversation.person == query.person)
                .expect("query about a person in the corpus");
            let mut last_value = None;
            let mut withdrawn = false;
            for turn in &conversation.turns {
                match &turn.effect {
                    TurnEffect::State { topic, value } if *topic == query.topic => {
                        last_value = Some(value.clone());
                    }
                    TurnEffect::Forget { topic } if *topic == query.topic => withdrawn = true,
                    _ => {}
                }
            }
            if withdrawn {
                assert_eq!(query.expected_document, None, "{query:?}");
            } else {
                assert_eq!(query.expected_value, last_value, "{query:?}");
                assert_eq!(
                    query.expected_document.as_deref(),
                    Some(document_id(&query.person, &query.topic).as_str())
                );
                let value = last_value.expect("stated");
                let stated = conversation
                    .turns
                    .iter()
                    .any(|turn| turn.role == Role::User && turn.text.contains(value.as_str()));
                assert!(
                    stated,
                    "the expected value is stated by the user: {query:?}"
                );
            }
            assert!(
                !query
                    .forbidden_values
                    .iter()
                    .any(|value| Some(value) == query.expected_value.as_ref())
            );
        }
        assert!(
            corpus
                .queries
                .iter()
                .any(|query| query.expected_document.is_none())
        );
        assert!(
            corpus
                .queries
                .iter()
                .any(|query| !query.forbidden_values.is_empty())
        );
    }

    #[test]
    fn recognise_reads_back_every_user_effect() {
        let corpus = generate(CorpusShape {
            people: 20,
            ..CorpusShape::default()
        });
        for turn in corpus.conversations.iter().flat_map(|c| &c.turns) {
            if turn.role != Role::User {
                continue;
            }
            let read = recognise(&turn.text);
            match &turn.effect {
                TurnEffect::None => assert_eq!(read, None, "{turn:?}"),
                TurnEffect::State { topic, value } => match read {
                    Some(Recognised::State {
                        topic: read_topic,
                        value: read_value,
                        ..
                    }) => assert_eq!((read_topic, read_value), (topic.as_str(), value.as_str())),
                    other => panic!("{turn:?} read as {other:?}"),
                },
                TurnEffect::Forget { topic } => match read {
                    Some(Recognised::Forget { topic: read_topic }) => assert_eq!(read_topic, topic),
                    other => panic!("{turn:?} read as {other:?}"),
                },
            }
        }
    }
}
