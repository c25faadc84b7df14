//! Sorted samples and their quantiles.

/// Measurements (seconds, µs or KiB: the caller's unit), sorted.
#[derive(Debug, Clone)]
pub struct Samples(Vec<f64>);

impl Samples {
    /// Sorts `values`.
    pub fn new(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Self(values)
    }

    /// Returns the nearest-rank quantile `q` (0.5 for the median), NaN when there is no sample.
    pub fn quantile(&self, q: f64) -> f64 {
        let rank = (q * self.0.len() as f64).ceil() as usize;
        self.0.get(rank.clamp(1, self.0.len().max(1)) - 1).copied().unwrap_or(f64::NAN)
    }

    /// Returns the median: the nearest-rank quantile 0.5.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }
}

/// Returns the median of `values`.
pub fn median(values: Vec<f64>) -> f64 {
    Samples::new(values).median()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let samples = Samples::new((1..=10).rev().map(f64::from).collect());
        assert_eq!(samples.median(), 5.0);
        assert_eq!(samples.quantile(0.9), 9.0);
        assert_eq!(samples.quantile(0.0), 1.0);
        assert!(Samples::new(Vec::new()).median().is_nan());
    }
}
