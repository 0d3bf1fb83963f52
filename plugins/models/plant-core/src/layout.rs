//! Which kind each tag is, and its metadata: tags are grouped into equips of
//! `points_per_equip` points that all follow one template built from the mix.

use crate::params::{Mix, Params};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Temperature,
    Flow,
    Pressure,
    Vibration,
    Counter,
    State,
}

impl Kind {
    pub const ALL: [Kind; 6] =
        [Kind::Temperature, Kind::Flow, Kind::Pressure, Kind::Vibration, Kind::Counter, Kind::State];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Temperature => "temperature",
            Kind::Flow => "flow",
            Kind::Pressure => "pressure",
            Kind::Vibration => "vibration",
            Kind::Counter => "counter",
            Kind::State => "state",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Kind::Temperature => "°C",
            Kind::Flow => "m³/h",
            Kind::Pressure => "bar",
            Kind::Vibration => "mm/s",
            Kind::Counter => "count",
            Kind::State => "",
        }
    }

    fn label_stem(self) -> &'static str {
        match self {
            Kind::Temperature => "temp",
            Kind::Flow => "flow",
            Kind::Pressure => "pressure",
            Kind::Vibration => "vibration",
            Kind::Counter => "count",
            Kind::State => "state",
        }
    }

    /// Haystack-style markers of a point of this kind.
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            Kind::Temperature => &["point", "sensor", "temp"],
            Kind::Flow => &["point", "sensor", "flow"],
            Kind::Pressure => &["point", "sensor", "pressure"],
            Kind::Vibration => &["point", "sensor", "vibration"],
            Kind::Counter => &["point", "sensor", "totalizer"],
            Kind::State => &["point", "sensor", "enum"],
        }
    }

    fn weight(self, mix: &Mix) -> f64 {
        match self {
            Kind::Temperature => mix.temperature,
            Kind::Flow => mix.flow,
            Kind::Pressure => mix.pressure,
            Kind::Vibration => mix.vibration,
            Kind::Counter => mix.counter,
            Kind::State => mix.state,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TagMeta {
    pub index: u32,
    pub kind: Kind,
    pub site: u32,
    pub equip: u32,
    pub label: String,
}

/// The equip template: kind and label of each position in an equip.
#[derive(Debug, Clone)]
pub struct Layout {
    pub points_per_equip: u32,
    pub equips_per_site: u32,
    template: Vec<(Kind, String)>,
}

impl Layout {
    pub fn new(p: &Params) -> Layout {
        let n = p.points_per_equip as usize;
        let total: f64 = Kind::ALL.iter().map(|k| k.weight(&p.mix)).sum();
        // Largest remainder: exact counts that add up to n.
        let exact: Vec<f64> = Kind::ALL.iter().map(|k| k.weight(&p.mix) / total * n as f64).collect();
        let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
        let mut left = n - counts.iter().sum::<usize>();
        let mut order: Vec<usize> = (0..exact.len()).collect();
        order.sort_by(|&a, &b| {
            let ra = exact[a] - exact[a].floor();
            let rb = exact[b] - exact[b].floor();
            rb.partial_cmp(&ra).unwrap().then(a.cmp(&b))
        });
        for i in order {
            if left == 0 {
                break;
            }
            if exact[i] > 0.0 {
                counts[i] += 1;
                left -= 1;
            }
        }
        let mut template = Vec::with_capacity(n);
        for (k, c) in Kind::ALL.iter().zip(&counts) {
            for j in 0..*c {
                template.push((*k, format!("{}{}", k.label_stem(), j + 1)));
            }
        }
        Layout { points_per_equip: p.points_per_equip, equips_per_site: p.equips_per_site, template }
    }

    #[inline]
    pub fn kind(&self, tag: u32) -> Kind {
        self.template[(tag % self.points_per_equip) as usize].0
    }

    #[inline]
    pub fn equip(&self, tag: u32) -> u32 {
        tag / self.points_per_equip
    }

    pub fn meta(&self, tag: u32) -> TagMeta {
        let (kind, label) = &self.template[(tag % self.points_per_equip) as usize];
        let equip = self.equip(tag);
        TagMeta { index: tag, kind: *kind, site: equip / self.equips_per_site, equip, label: label.clone() }
    }
}
