"""The site region as named places built from the vendored grid data (data/carbon), keeping the stored codes."""
from engine.economics.energy import grid_intensity
from engine.regions import region_choices, region_label


def test_named_places_cover_countries_states_and_cloud_regions():
    labels = {label: code for label, code in region_choices()}
    assert labels["France (FRA)"] == "FRA" and labels["US Virginia (US-VA)"] == "US-VA"
    assert labels["gcp europe-west4: Eemshaven, Netherlands"] == "gcp:europe-west4"
    assert labels["aws us-east-1: US East (N. Virginia)"] == "aws:us-east-1"
    assert len(labels) > 250                                    # ~200 countries, 50 states, cloud regions


def test_every_listed_code_is_one_the_co2_model_reads():
    for _, code in region_choices():
        assert grid_intensity(code).g_per_kwh >= 0


def test_stored_codes_get_their_label_back():
    assert region_label("FRA") == "France (FRA)" and region_label("fra") == "France (FRA)"
    assert region_label("aws:us-east-1").startswith("aws us-east-1") and region_label("Atlantis") is None
